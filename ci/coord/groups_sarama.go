// groups_sarama.go — consumer groups with sarama 1.22 (Debian's
// golang-github-shopify-sarama-dev: its own JoinGroup/SyncGroup/Heartbeat/
// OffsetCommit code, the ConsumerGroup API), in phases that
// test_groups_sarama.sh runs around a broker restart.  Built in GOPATH mode.
// With config.Version 2.1 sarama sends JoinGroup v1, SyncGroup v0,
// Heartbeat v0, LeaveGroup v0, OffsetCommit v1, OffsetFetch v1,
// FindCoordinator v0 and DescribeGroups v0.
//
//	groups_sarama setup BOOT TOPIC
//	    ClusterAdmin.CreateTopic with 4 partitions.
//	groups_sarama produce BOOT TOPIC FROM TO ACKS
//	    SyncProducer: record i (key k<i>, value v<i>) to partition i % 4;
//	    appends "i partition offset" of every acknowledged record to ACKS.
//	groups_sarama members BOOT TOPIC GROUP ACKS FROM TO N
//	    N ConsumerGroup instances of GROUP at once (Offsets.Initial =
//	    OffsetOldest) must together consume exactly the acknowledged records
//	    FROM..TO-1, each once, each at the partition and offset it was
//	    acknowledged with; then they close (final commit, LeaveGroup).
//	    With N > 1 a member processes records only in a generation where
//	    every member holds partitions, so each of them reads its share.
//	    FROM = 0: each partition's first claim starts at OffsetOldest (the
//	    group has no offsets); FROM > 0: at the group's committed offset,
//	    the number of records of the partition below FROM.
//	groups_sarama offsets BOOT TOPIC GROUP ACKS TO
//	    OffsetFetch (ClusterAdmin.ListConsumerGroupOffsets): every
//	    partition's committed offset equals its high watermark and the
//	    number of acknowledged records below TO in it; DescribeGroups
//	    shows the group Empty.
package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

const nparts = 4

func check(cond bool, format string, a ...interface{}) {
	if !cond {
		fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", a...)
		os.Exit(1)
	}
}

func must(err error, what string) {
	check(err == nil, "%s: %v", what, err)
}

func ok(format string, a ...interface{}) { fmt.Printf("ok "+format+"\n", a...) }

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V2_1_0_0
	c.ClientID = "kaas-groups-sarama"
	c.Metadata.Retry.Max = 30
	c.Metadata.Retry.Backoff = 500 * time.Millisecond
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Retry.Max = 10
	c.Consumer.Return.Errors = true
	c.Consumer.MaxWaitTime = 100 * time.Millisecond
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.CommitInterval = 500 * time.Millisecond
	c.Consumer.Group.Session.Timeout = 30 * time.Second
	c.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	c.Consumer.Group.Rebalance.Timeout = 60 * time.Second
	c.Consumer.Group.Rebalance.Retry.Max = 30
	c.Consumer.Group.Rebalance.Retry.Backoff = 500 * time.Millisecond
	return c
}

type ack struct{ p, o int64 }

// readAcks: record i -> where the broker acknowledged it.
func readAcks(path string) map[int]ack {
	f, err := os.Open(path)
	must(err, "open "+path)
	defer f.Close()
	acks := map[int]ack{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var i int
		var a ack
		_, err := fmt.Sscanf(sc.Text(), "%d %d %d", &i, &a.p, &a.o)
		must(err, "parse "+path)
		_, dup := acks[i]
		check(!dup, "record %d acknowledged twice", i)
		acks[i] = a
	}
	must(sc.Err(), "read "+path)
	return acks
}

// below: per partition, how many acknowledged records have i < to.
func below(acks map[int]ack, to int) map[int32]int64 {
	n := map[int32]int64{}
	for i, a := range acks {
		if i < to {
			n[int32(a.p)]++
		}
	}
	return n
}

func setup(boot, topic string) {
	a, err := sarama.NewClusterAdmin([]string{boot}, config())
	must(err, "NewClusterAdmin")
	defer a.Close()
	must(a.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: nparts, ReplicationFactor: 1}, false), "CreateTopic")
	ok("%s: created with %d partitions", topic, nparts)
}

func produce(boot, topic string, from, to int, out string) {
	p, err := sarama.NewSyncProducer([]string{boot}, config())
	must(err, "NewSyncProducer")
	var msgs []*sarama.ProducerMessage
	for i := from; i < to; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: int32(i % nparts),
			Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("v%d", i)),
			Metadata: i})
	}
	must(p.SendMessages(msgs), "SendMessages")
	must(p.Close(), "close producer")
	f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0644)
	must(err, "open "+out)
	for _, m := range msgs {
		_, err = fmt.Fprintf(f, "%d %d %d\n", m.Metadata.(int), m.Partition, m.Offset)
		must(err, "write "+out)
	}
	must(f.Close(), "close "+out)
	ok("%s: records %d..%d acknowledged (SyncProducer, partition i %% %d)", topic, from, to-1, nparts)
}

// What the members of one "members" run saw, shared by their handlers.
type state struct {
	mu      sync.Mutex
	n       int         // members
	acks    map[int]ack // every acknowledged record
	from    int         // the records this run must get: from..to-1
	to      int
	seen    map[int]int // record -> member that got it
	got     []int       // records per member
	gen     []int32     // each member's current generation (-1: none)
	claims  []map[int32]bool
	byGen   map[int32]map[int][]int32 // generation -> member -> claimed partitions
	initial map[int32]int64           // partition -> InitialOffset of its first claim
}

func (s *state) setup(m int, sess sarama.ConsumerGroupSession, topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen[m] = sess.GenerationID()
	s.claims[m] = map[int32]bool{}
	for _, p := range sess.Claims()[topic] {
		s.claims[m][p] = true
	}
	if s.byGen[sess.GenerationID()] == nil {
		s.byGen[sess.GenerationID()] = map[int][]int32{}
	}
	s.byGen[sess.GenerationID()][m] = sess.Claims()[topic]
	fmt.Printf("member %d: generation %d, partitions %v\n", m, sess.GenerationID(), sess.Claims()[topic])
}

func (s *state) cleanup(m int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen[m] = -1
	s.claims[m] = nil
}

// open: every member is in generation g and holds a partition.
func (s *state) open(g int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for m := 0; m < s.n; m++ {
		if s.gen[m] != g || len(s.claims[m]) == 0 {
			return false
		}
	}
	return true
}

func (s *state) firstClaim(p int32, off int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, had := s.initial[p]; !had {
		s.initial[p] = off
	}
}

func (s *state) record(m int, g int32, msg *sarama.ConsumerMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, err := strconv.Atoi(strings.TrimPrefix(string(msg.Key), "k"))
	check(err == nil && string(msg.Key) == fmt.Sprintf("k%d", i), "member %d: record with key %q", m, msg.Key)
	check(string(msg.Value) == fmt.Sprintf("v%d", i), "member %d: record %d has value %q", m, i, msg.Value)
	check(i >= s.from && i < s.to, "member %d got record %d (partition %d offset %d), outside %d..%d: "+
		"consumed before, or never produced", m, i, msg.Partition, msg.Offset, s.from, s.to-1)
	a := s.acks[i]
	check(a.p == int64(msg.Partition) && a.o == msg.Offset, "record %d read at partition %d offset %d, acknowledged at %d/%d",
		i, msg.Partition, msg.Offset, a.p, a.o)
	prev, dup := s.seen[i]
	check(!dup, "record %d delivered twice (members %d and %d)", i, prev, m)
	check(s.gen[m] == g && s.claims[m][msg.Partition], "member %d got partition %d outside its claims %v of generation %d",
		m, msg.Partition, s.claims[m], g)
	s.seen[i] = m
	s.got[m]++
}

func (s *state) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

type handler struct {
	m     int
	s     *state
	topic string
}

func (h *handler) Setup(sess sarama.ConsumerGroupSession) error {
	h.s.setup(h.m, sess, h.topic)
	return nil
}

func (h *handler) Cleanup(sarama.ConsumerGroupSession) error {
	h.s.cleanup(h.m)
	return nil
}

func (h *handler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	h.s.firstClaim(claim.Partition(), claim.InitialOffset())
	for !h.s.open(sess.GenerationID()) {
		select {
		case <-sess.Context().Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	for msg := range claim.Messages() {
		h.s.record(h.m, sess.GenerationID(), msg)
		sess.MarkMessage(msg, "")
	}
	return nil
}

func members(boot, topic, group, acksPath string, from, to, n int) {
	acks := readAcks(acksPath)
	for i := from; i < to; i++ {
		_, had := acks[i]
		check(had, "record %d was not acknowledged", i)
	}
	s := &state{n: n, acks: acks, from: from, to: to, seen: map[int]int{}, got: make([]int, n),
		gen: make([]int32, n), claims: make([]map[int32]bool, n), byGen: map[int32]map[int][]int32{},
		initial: map[int32]int64{}}
	ctx, cancel := context.WithCancel(context.Background())
	var groups []sarama.ConsumerGroup
	var wg sync.WaitGroup
	for m := 0; m < n; m++ {
		s.gen[m] = -1
		g, err := sarama.NewConsumerGroup([]string{boot}, group, config())
		must(err, "NewConsumerGroup")
		groups = append(groups, g)
		go func(m int) {
			for e := range g.Errors() {
				fmt.Fprintf(os.Stderr, "member %d: %v\n", m, e)
			}
		}(m)
		wg.Add(1)
		go func(m int) {
			defer wg.Done()
			h := &handler{m: m, s: s, topic: topic}
			for ctx.Err() == nil {
				if err := g.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
					fmt.Fprintf(os.Stderr, "member %d: Consume: %v\n", m, err)
					time.Sleep(500 * time.Millisecond)
				}
			}
		}(m)
	}
	want := to - from
	deadline := time.Now().Add(150 * time.Second)
	for s.count() < want {
		check(time.Now().Before(deadline), "the group consumed %d of records %d..%d (per member %v)",
			s.count(), from, to-1, s.got)
		time.Sleep(50 * time.Millisecond)
	}
	// Every session ends with its final commit before Consume returns;
	// then each member leaves the group.
	cancel()
	wg.Wait()
	for m, g := range groups {
		must(g.Close(), fmt.Sprintf("close member %d", m))
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	check(len(s.seen) == want, "%d records consumed, want %d", len(s.seen), want)
	for m := 0; m < n; m++ {
		check(s.got[m] > 0, "member %d consumed nothing (per member %v)", m, s.got)
	}
	// Within a generation the members' partitions are disjoint; once
	// every member is in, they cover the topic.
	var gens []int
	for g := range s.byGen {
		gens = append(gens, int(g))
	}
	sort.Ints(gens)
	split := false
	for _, g := range gens {
		owner := map[int32]int{}
		for m, ps := range s.byGen[int32(g)] {
			for _, p := range ps {
				o, had := owner[p]
				check(!had, "generation %d: partition %d assigned to members %d and %d", g, p, o, m)
				owner[p] = m
			}
		}
		if len(s.byGen[int32(g)]) == n {
			check(len(owner) == nparts, "generation %d of all %d members assigns %d of %d partitions",
				g, n, len(owner), nparts)
			split = true
		}
	}
	check(split, "no generation had all %d members: %v", n, s.byGen)
	// Where each partition's first claim started.
	start := below(acks, from)
	for p := int32(0); p < nparts; p++ {
		off, had := s.initial[p]
		check(had, "partition %d was never claimed", p)
		if from == 0 {
			check(off == sarama.OffsetOldest, "partition %d: first claim at %d, want OffsetOldest (no committed offset)", p, off)
		} else {
			check(off == start[p], "partition %d: first claim at offset %d, want the committed offset %d", p, off, start[p])
		}
	}
	ok("%d member(s) of %s consumed records %d..%d once each (per member %v; generations %v); "+
		"first claims at %v", n, group, from, to-1, s.got, gens, s.initial)
}

func offsets(boot, topic, group, acksPath string, to int) {
	want := below(readAcks(acksPath), to)
	client, err := sarama.NewClient([]string{boot}, config())
	must(err, "NewClient")
	defer client.Close()
	a, err := sarama.NewClusterAdmin([]string{boot}, config())
	must(err, "NewClusterAdmin")
	defer a.Close()
	parts := []int32{}
	for p := int32(0); p < nparts; p++ {
		parts = append(parts, p)
	}
	res, err := a.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	must(err, "ListConsumerGroupOffsets")
	check(res.Err == sarama.ErrNoError, "OffsetFetch: %v", res.Err)
	got := []int64{}
	for _, p := range parts {
		b := res.GetBlock(topic, p)
		check(b != nil, "OffsetFetch: no answer for partition %d", p)
		check(b.Err == sarama.ErrNoError, "OffsetFetch partition %d: %v", p, b.Err)
		hw, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		must(err, "GetOffset newest")
		check(hw == want[p], "partition %d: high watermark %d, but %d records were acknowledged", p, hw, want[p])
		check(b.Offset == hw, "partition %d: committed offset %d, high watermark %d", p, b.Offset, hw)
		got = append(got, b.Offset)
	}
	d, err := a.DescribeConsumerGroups([]string{group})
	must(err, "DescribeConsumerGroups")
	check(len(d) == 1 && d[0].Err == sarama.ErrNoError && d[0].State == "Empty" && len(d[0].Members) == 0 &&
		d[0].ProtocolType == "consumer", "DescribeGroups %s: %+v", group, d)
	ok("%s: committed offsets %v are the high watermarks; the group is Empty", group, got)
}

func main() {
	if p := os.Getenv("SARAMA_LOG"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0644)
		must(err, "open "+p)
		sarama.Logger = log.New(f, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	}
	a := os.Args[1:]
	check(len(a) >= 3, "usage: groups_sarama PHASE BOOT TOPIC ...")
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		must(err, "number "+s)
		return n
	}
	switch {
	case a[0] == "setup":
		setup(a[1], a[2])
	case a[0] == "produce" && len(a) == 6:
		produce(a[1], a[2], num(a[3]), num(a[4]), a[5])
	case a[0] == "members" && len(a) == 8:
		members(a[1], a[2], a[3], a[4], num(a[5]), num(a[6]), num(a[7]))
	case a[0] == "offsets" && len(a) == 6:
		offsets(a[1], a[2], a[3], a[4], num(a[5]))
	default:
		check(false, "bad arguments: %v", a)
	}
}
