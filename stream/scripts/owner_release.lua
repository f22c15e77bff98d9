-- owner_release.lua: gives a partition lease up, when the caller still holds it (owner.go).
--
-- KEYS[1]  the lease key of one partition and group (PartitionLeaseKey)
-- ARGV[1]  consumer name (the owner)
--
-- Reply: 1 when deleted, 0 when the lease was not the caller's
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
