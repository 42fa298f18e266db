package server

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestConnectionCommands(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, nil)

	if v, err := rc.Ping(ctx).Result(); err != nil || v != "PONG" {
		t.Fatalf("PING = %q, %v", v, err)
	}
	if v, err := rc.Do(ctx, "PING", "hi").Result(); err != nil || v != "hi" {
		t.Fatalf("PING hi = %q, %v", v, err)
	}
	if v, err := rc.Echo(ctx, "a\r\nb").Result(); err != nil || v != "a\r\nb" {
		t.Fatalf("ECHO = %q, %v", v, err)
	}
	if v, err := rc.Do(ctx, "SELECT", 0).Result(); err != nil || v != "OK" {
		t.Fatalf("SELECT 0 = %v, %v", v, err)
	}
	if err := rc.Do(ctx, "SELECT", 1).Err(); err == nil || err.Error() != "ERR DB index is out of range" {
		t.Fatalf("SELECT 1: %v", err)
	}
	if err := rc.Do(ctx, "SELECT", "x").Err(); err == nil || err.Error() != msgNotInteger {
		t.Fatalf("SELECT x: %v", err)
	}
	// go-redis selects the database itself when asked for another one.
	other := redis.NewClient(&redis.Options{Addr: ts.addr, DB: 3})
	defer other.Close()
	if err := other.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "DB index is out of range") {
		t.Fatalf("client on DB 3: %v", err)
	}

	// CLIENT.
	conn := ts.client(t, &redis.Options{PoolSize: 1}) // one connection: CLIENT state stays
	id, err := conn.ClientID(ctx).Result()
	if err != nil || id <= 0 {
		t.Fatalf("CLIENT ID = %d, %v", id, err)
	}
	if _, err := conn.ClientGetName(ctx).Result(); err != redis.Nil {
		t.Fatalf("CLIENT GETNAME before SETNAME: %v, want nil", err)
	}
	if err := conn.Do(ctx, "CLIENT", "SETNAME", "worker-1").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := conn.ClientGetName(ctx).Result(); err != nil || v != "worker-1" {
		t.Fatalf("CLIENT GETNAME = %q, %v", v, err)
	}
	if err := conn.Do(ctx, "CLIENT", "SETNAME", "a b").Err(); err == nil || err.Error() != msgBadClientName {
		t.Fatalf("CLIENT SETNAME with a space: %v", err)
	}
	if err := conn.Do(ctx, "CLIENT", "SETINFO", "LIB-NAME", "mylib").Err(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Do(ctx, "CLIENT", "SETINFO", "COLOR", "red").Err(); err == nil {
		t.Fatal("CLIENT SETINFO COLOR: no error")
	}
	if err := conn.Do(ctx, "CLIENT", "KILL", "x").Err(); err == nil || err.Error() != "ERR No such client" {
		t.Fatalf("CLIENT KILL x: %v", err)
	}

	// HELLO: RESP2 only.
	v, err := conn.Do(ctx, "HELLO", 2).Result()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := v.([]any)
	if !ok || len(m) != 14 || m[0] != "server" || m[1] != "tally" || m[4] != "proto" || m[5] != int64(2) || m[7] != id {
		t.Fatalf("HELLO 2 = %#v", v)
	}
	if err := conn.Do(ctx, "HELLO", 3).Err(); err == nil || err.Error() != "NOPROTO unsupported protocol version" {
		t.Fatalf("HELLO 3: %v", err)
	}
	if err := conn.Do(ctx, "HELLO", 2, "SETNAME", "w2").Err(); err != nil {
		t.Fatal(err)
	}
	if v, _ := conn.ClientGetName(ctx).Result(); v != "w2" {
		t.Fatalf("name after HELLO SETNAME = %q", v)
	}
	if err := conn.Do(ctx, "HELLO", 2, "BOGUS").Err(); err == nil || !strings.Contains(err.Error(), "Syntax error") {
		t.Fatalf("HELLO 2 BOGUS: %v", err)
	}

	// AUTH without a password configured.
	if err := rc.Do(ctx, "AUTH", "secret").Err(); err == nil || !strings.Contains(err.Error(), "without any password configured") {
		t.Fatalf("AUTH without requirepass: %v", err)
	}

	// QUIT closes the connection after its reply.
	r := ts.raw(t)
	r.send(resp("QUIT") + resp("PING"))
	if l := r.mustLine(); l != "+OK" {
		t.Fatalf("QUIT = %q", l)
	}
	if !r.closed() {
		t.Fatal("connection open after QUIT")
	}

	// Inline commands, as typed in telnet.
	r = ts.raw(t)
	r.send("PING\r\nHINCRBY posts:5 likes 2\r\n")
	if l := r.mustLine(); l != "+PONG" {
		t.Fatalf("inline PING = %q", l)
	}
	if l := r.mustLine(); l != ":2" {
		t.Fatalf("inline HINCRBY = %q", l)
	}
}

func TestAuth(t *testing.T) {
	ts := newTestServer(t, &Options{Password: "s3cret"})

	// Before AUTH every command but AUTH, HELLO and QUIT is refused.
	r := ts.raw(t)
	for _, cmd := range []string{resp("PING"), resp("HINCRBY", "posts:1", "likes", "1"), resp("CONFIG", "GET", "save"),
		resp("TALLY.MGET", "posts", "1"), resp("COMMAND"), resp("INFO"), resp("CLIENT", "ID")} {
		r.send(cmd)
		if l := r.mustLine(); l != "-NOAUTH Authentication required." {
			t.Fatalf("%q before AUTH = %q", cmd, l)
		}
	}
	if got := ts.row(t, "posts", 1); got[2] != 0 {
		t.Fatal("a write before AUTH changed the store")
	}
	r.send(resp("HELLO", "2"))
	if l := r.mustLine(); !strings.HasPrefix(l, "-NOAUTH HELLO must be called") {
		t.Fatalf("HELLO before AUTH = %q", l)
	}
	r.send(resp("AUTH", "wrong"))
	if l := r.mustLine(); l != "-"+msgWrongPass {
		t.Fatalf("AUTH wrong = %q", l)
	}
	r.send(resp("AUTH", "nobody", "s3cret"))
	if l := r.mustLine(); l != "-"+msgWrongPass {
		t.Fatalf("AUTH nobody = %q", l)
	}
	r.send(resp("PING"))
	if l := r.mustLine(); l != "-NOAUTH Authentication required." {
		t.Fatalf("PING after failed AUTH = %q", l)
	}
	r.send(resp("AUTH", "s3cret") + resp("PING"))
	if l := r.mustLine(); l != "+OK" {
		t.Fatalf("AUTH = %q", l)
	}
	if l := r.mustLine(); l != "+PONG" {
		t.Fatalf("PING after AUTH = %q", l)
	}
	// The two-argument form, on another connection.
	r2 := ts.raw(t)
	r2.send(resp("AUTH", "default", "s3cret") + resp("HINCRBY", "posts:1", "likes", "1"))
	if l := r2.mustLine(); l != "+OK" {
		t.Fatalf("AUTH default = %q", l)
	}
	if l := r2.mustLine(); l != ":1" {
		t.Fatalf("HINCRBY after AUTH = %q", l)
	}

	// go-redis: HELLO 3 AUTH fails with NOPROTO, it falls back to AUTH.
	good := ts.client(t, &redis.Options{Password: "s3cret"})
	if err := good.Ping(ctx).Err(); err != nil {
		t.Fatalf("go-redis with the password: %v", err)
	}
	bad := ts.client(t, &redis.Options{Password: "nope"})
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("go-redis with a wrong password: %v", err)
	}
	none := ts.client(t, nil)
	if err := none.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("go-redis without a password: %v", err)
	}
	// HELLO 2 AUTH authenticates in one step.
	r3 := ts.raw(t)
	r3.send(resp("HELLO", "2", "AUTH", "default", "s3cret") + resp("PING"))
	if l := r3.mustLine(); l != "*14" {
		t.Fatalf("HELLO 2 AUTH = %q", l)
	}
	for i := 0; i < 14; i++ {
		if l := r3.mustLine(); strings.HasPrefix(l, "$") {
			r3.mustLine()
		} else if strings.HasPrefix(l, "*0") {
			continue
		}
	}
	if l := r3.mustLine(); l != "+PONG" {
		t.Fatalf("PING after HELLO AUTH = %q", l)
	}
}

func TestServerCommands(t *testing.T) {
	ts := newTestServer(t, &Options{MaxClients: 123})
	rc := ts.client(t, nil)

	if v, err := rc.ConfigGet(ctx, "*").Result(); err != nil ||
		v["save"] != "" || v["appendonly"] != "yes" || v["appendfsync"] != "no" || v["maxclients"] != "123" || v["databases"] != "1" {
		t.Fatalf("CONFIG GET * = %v, %v", v, err)
	}
	if v, err := rc.Do(ctx, "CONFIG", "GET", "save", "appendonly").Result(); err != nil ||
		!reflect.DeepEqual(v, []any{"appendonly", "yes", "save", ""}) {
		t.Fatalf("CONFIG GET save appendonly = %#v, %v", v, err)
	}
	if v, err := rc.ConfigGet(ctx, "maxmemory").Result(); err != nil || len(v) != 0 {
		t.Fatalf("CONFIG GET maxmemory = %v, %v", v, err)
	}
	if err := rc.ConfigSet(ctx, "save", "").Err(); err == nil || !strings.Contains(err.Error(), "Unknown option") {
		t.Fatalf("CONFIG SET save: %v", err)
	}
	if err := rc.Do(ctx, "CONFIG").Err(); err == nil || !strings.Contains(err.Error(), "wrong number of arguments for 'config' command") {
		t.Fatalf("CONFIG: %v", err)
	}

	// COMMAND and friends.
	n, err := rc.Do(ctx, "COMMAND", "COUNT").Int64()
	if err != nil || n != int64(len(ts.s.cmds.sorted)) || n < 25 {
		t.Fatalf("COMMAND COUNT = %d, %v", n, err)
	}
	all, err := rc.Command(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != int(n) {
		t.Fatalf("COMMAND lists %d commands, COMMAND COUNT says %d", len(all), n)
	}
	hincr := all["hincrby"]
	if hincr == nil || hincr.Arity != 4 || hincr.FirstKeyPos != 1 || !reflect.DeepEqual(hincr.Flags, []string{"write", "fast"}) {
		t.Fatalf("COMMAND hincrby = %+v", hincr)
	}
	if cfg := all["config"]; cfg == nil || cfg.Arity != -2 {
		t.Fatalf("COMMAND config = %+v", cfg)
	}
	names, err := rc.Do(ctx, "COMMAND", "LIST").StringSlice()
	if err != nil || len(names) != int(n) {
		t.Fatalf("COMMAND LIST = %v, %v", names, err)
	}
	info, err := rc.Do(ctx, "COMMAND", "INFO", "get", "nosuch", "config|get").Slice()
	if err != nil || len(info) != 3 || info[1] != nil || info[0].([]any)[0] != "get" || info[2].([]any)[0] != "config|get" {
		t.Fatalf("COMMAND INFO = %#v, %v", info, err)
	}
	docs, err := rc.Do(ctx, "COMMAND", "DOCS", "hincrby", "decr", "client").Slice()
	if err != nil || len(docs) != 6 {
		t.Fatalf("COMMAND DOCS = %#v, %v", docs, err)
	}
	hd := docMap(docs[1])
	if !strings.Contains(hd["summary"].(string), "never goes below 0") || hd["group"] != "hash" {
		t.Fatalf("COMMAND DOCS hincrby = %#v", hd)
	}
	args := hd["arguments"].([]any)
	if len(args) != 3 || docMap(args[0])["type"] != "key" || docMap(args[2])["name"] != "increment" {
		t.Fatalf("COMMAND DOCS hincrby arguments = %#v", args)
	}
	if !strings.Contains(docMap(docs[3])["summary"].(string), "never go below 0") {
		t.Fatalf("COMMAND DOCS decr does not say counts stop at 0: %#v", docs[3])
	}
	subs := docMap(docMap(docs[5])["subcommands"])
	if _, ok := subs["client|id"]; !ok {
		t.Fatalf("COMMAND DOCS client subcommands = %#v", subs)
	}

	// DBSIZE counts stored rows.
	for i := 1; i <= 3; i++ {
		rc.HIncrBy(ctx, "posts:"+strconv.Itoa(i), "likes", 1)
	}
	rc.Incr(ctx, "key:1")
	rc.HIncrBy(ctx, "posts:1", "likes", -1) // back to all zeros: not stored
	if n, err := rc.DBSize(ctx).Result(); err != nil || n != 3 {
		t.Fatalf("DBSIZE = %d, %v; want 3", n, err)
	}

	// INFO in Redis's format.
	text, err := rc.Info(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Server\r\n", "redis_version:", "\r\n\r\n# Clients\r\n", "connected_clients:1\r\n",
		"maxclients:123\r\n", "# Memory\r\n", "used_memory:", "used_memory_rss:", "# Persistence\r\n", "loading:0",
		"tally_durability:nosync", "# Stats\r\n", "total_commands_processed:", "# Keyspace\r\n",
		"db0:keys=3,expires=0,avg_ttl=0\r\n", "# Tally\r\n", "count_floor:0", "counter_posts:columns=reposts|comments|likes,rows=2,"} {
		if !strings.Contains(text, want) {
			t.Errorf("INFO lacks %q:\n%s", want, text)
		}
	}
	for _, want := range []string{"# Replication\r\nrole:master\r\n", "connected_slaves:0\r\n", "# CPU\r\nused_cpu_sys:",
		"used_cpu_user:", "instantaneous_ops_per_sec:", "# Errorstats\r\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("INFO lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "# Commandstats") {
		t.Error("INFO shows commandstats by default (Redis shows them for INFO all / commandstats only)")
	}
	// Commandstats and errorstats as redis_exporter parses them: one
	// rejected call (wrong arity) and one failed call (not a number).
	rc.Do(ctx, "HINCRBY", "posts:1")
	rc.Do(ctx, "HINCRBY", "posts:1", "likes", "x")
	full, err2 := rc.Info(ctx, "all").Result()
	if err2 != nil {
		t.Fatal(err2)
	}
	if !regexp.MustCompile(`\r\ncmdstat_hincrby:calls=\d+,usec=\d+,usec_per_call=\d+\.\d\d,rejected_calls=1,failed_calls=1\r\n`).MatchString(full) ||
		!regexp.MustCompile(`\r\nerrorstat_ERR:count=\d+\r\n`).MatchString(full) || !strings.Contains(full, "cmdstat_config|get:calls=") {
		t.Errorf("INFO all: commandstats or errorstats missing:\n%s", full)
	}
	if text, _ := rc.Info(ctx, "clients").Result(); !strings.HasPrefix(text, "# Clients\r\n") || strings.Contains(text, "# Server") {
		t.Errorf("INFO clients = %q", text)
	}
	if text, _ := rc.Info(ctx, "nosuch").Result(); text != "" {
		t.Errorf("INFO nosuch = %q", text)
	}

	// SAVE checkpoints.
	before := ts.db.Stats().CheckpointSeq
	if err := rc.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if after := ts.db.Stats().CheckpointSeq; after <= before {
		t.Fatalf("SAVE: checkpoint seq %d -> %d", before, after)
	}
}

// docMap turns a flat [k1, v1, k2, v2...] reply into a map.
func docMap(v any) map[string]any {
	l, _ := v.([]any)
	m := map[string]any{}
	for i := 0; i+1 < len(l); i += 2 {
		k, _ := l[i].(string)
		m[k] = l[i+1]
	}
	return m
}
