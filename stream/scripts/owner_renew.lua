-- owner_renew.lua: extends a partition lease held by its owner (owner.go).
--
-- KEYS[1]  the lease key of one partition and group (PartitionLeaseKey)
-- ARGV[1]  consumer name (the owner)
-- ARGV[2]  lease time to live, milliseconds
--
-- Reply: 1 when the lease is the caller's and now lasts ARGV[2] ms more, 0 when it is not
-- (expired, or taken by another consumer since)
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
