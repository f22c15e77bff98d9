package cache_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redstream-go/redstream/cache"
)

// userTable stands for the application's database.
type userTable map[int]User

// FindUser returns the user of that id, or an error wrapping cache.ErrNotFound.
func (t userTable) FindUser(ctx context.Context, id int) (User, error) {
	u, ok := t[id]
	if !ok {
		return User{}, fmt.Errorf("user %d: %w", id, cache.ErrNotFound)
	}
	return u, nil
}

// ExampleGetOrLoad reads a user through the cache: the first call loads it from the database
// and caches it, the next ones read it from Redis.
func ExampleGetOrLoad() {
	client, stop := embedded() // against a server: rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	defer stop()               // the client is yours: Cache.Close does not close it
	ctx := context.Background()
	db := userTable{1: {ID: 1, Name: "Ada"}}

	c, err := cache.New(client, cache.DefaultConfig())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	loadUser := func(ctx context.Context) (User, error) {
		return db.FindUser(ctx, 1) // return cache.ErrNotFound (wrapped is fine) for "no such user"
	}
	u, err := cache.GetOrLoad(ctx, c, "user:1", cache.DefaultTTL, loadUser)
	fmt.Println(u.Name, err)
	delete(db, 1)
	u, err = cache.GetOrLoad(ctx, c, "user:1", cache.DefaultTTL, loadUser) // from Redis
	fmt.Println(u.Name, err)
	// Output:
	// Ada <nil>
	// Ada <nil>
}

// FindUsers returns the users of the keys "user:<id>" it knows, by key: one query for many
// keys. Keys it does not know are absent from the map.
func (t userTable) FindUsers(ctx context.Context, keys []string) (map[string]User, error) {
	out := map[string]User{}
	for _, k := range keys {
		id, err := strconv.Atoi(strings.TrimPrefix(k, "user:"))
		if u, ok := t[id]; ok && err == nil {
			out[k] = u
		}
	}
	return out, nil
}

// ExampleGetMany_database loads every miss of a batch read with one database query; a key
// the query does not return is remembered as not found.
func ExampleGetMany_database() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	db := userTable{1: {ID: 1, Name: "Ada"}, 2: {ID: 2, Name: "Grace"}}
	c, err := cache.New(client, cache.DefaultConfig())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	loadUsers := func(ctx context.Context, keys []string) (map[string]User, error) {
		return db.FindUsers(ctx, keys) // one query for every miss; absent keys are "not found"
	}
	users, err := cache.GetMany(ctx, c, []string{"user:1", "user:2", "user:404"}, cache.DefaultTTL, loadUsers)
	fmt.Println(len(users), users["user:1"].Name, users["user:2"].Name, err)
	_, err = cache.Get[User](ctx, c, "user:404") // a null marker now
	fmt.Println(errors.Is(err, cache.ErrNotFound))
	// Output:
	// 2 Ada Grace <nil>
	// true
}
