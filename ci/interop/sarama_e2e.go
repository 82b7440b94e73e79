// sarama_e2e.go — sarama (Go, Debian's golang-github-shopify-sarama-dev)
// against kaas, in phases that test_sarama.sh runs around broker restarts.
// Built in GOPATH mode; sarama never calls ApiVersions, so config.Version
// says which request versions to use (2.1: record batches v2, zstd, Fetch
// v10, Produce v7).
//
//	sarama_e2e admin BOOT TOPIC
//	    ClusterAdmin: CreateTopic (3 partitions, configs), DescribeTopics,
//	    DescribeConfig, DeleteTopic of a scratch topic.
//	sarama_e2e produce BOOT TOPIC RECORDS OUT CODEC
//	    SyncProducer.SendMessages of the records in the file RECORDS
//	    (`spec.py records`; record i to partition i % 3, WaitForAll); each
//	    acknowledged record appended to OUT.
//	sarama_e2e consume BOOT TOPIC OUT
//	    a PartitionConsumer per partition from OffsetOldest to the high
//	    watermark; spec.py's consumed lines.
//	sarama_e2e times BOOT TOPIC OUT TS...
//	    Client.GetOffset for the times TS... (`spec.py times`)
//	sarama_e2e records BOOT TOPIC
//	    ClusterAdmin.DeleteRecords below offset 10 of partition 0, then a
//	    consumer from OffsetOldest starts there.
package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/Shopify/sarama"
)

const nparts = 3

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

// One record of the file `spec.py records` writes: spec.py defines the
// records of a run, this program only reads them.
type specRecord struct {
	I  int        `json:"i"`
	K  *string    `json:"k"`
	V  *string    `json:"v"`
	H  [][]string `json:"h"`
	Ts int64      `json:"ts"`
}

// nil for null, empty for "", the bytes otherwise.
func unhx(s *string) []byte {
	if s == nil {
		return nil
	}
	b, err := hex.DecodeString(*s)
	must(err, "records file: hex")
	if b == nil {
		b = []byte{}
	}
	return b
}

func readRecords(path string) []specRecord {
	data, err := os.ReadFile(path)
	must(err, "read "+path)
	var recs []specRecord
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var r specRecord
		must(json.Unmarshal([]byte(line), &r), "records file: "+line)
		recs = append(recs, r)
	}
	return recs
}

func headersOf(r specRecord) []sarama.RecordHeader {
	var h []sarama.RecordHeader
	for _, kv := range r.H {
		check(len(kv) == 2, "records file: header %v", kv)
		h = append(h, sarama.RecordHeader{Key: []byte(kv[0]), Value: unhx(&kv[1])})
	}
	return h
}

func hx(b []byte) interface{} {
	if b == nil {
		return nil
	}
	return hex.EncodeToString(b)
}

func encoder(b []byte) sarama.Encoder {
	if b == nil {
		return nil
	}
	return sarama.ByteEncoder(b)
}

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V2_1_0_0
	c.ClientID = "kaas-interop-sarama"
	c.Metadata.Retry.Max = 30
	c.Metadata.Retry.Backoff = 500 * time.Millisecond
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Retry.Max = 10
	c.Consumer.Return.Errors = true
	c.Consumer.MaxWaitTime = 100 * time.Millisecond
	// TLS when KAAS_TLS_CA is set (ci/tls/test_tls.sh); KAAS_TLS_CERT/KEY: mutual.
	if ca := os.Getenv("KAAS_TLS_CA"); ca != "" {
		pem, err := os.ReadFile(ca)
		must(err, "KAAS_TLS_CA")
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			check(false, "KAAS_TLS_CA: no certificate in %s", ca)
		}
		tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if cf := os.Getenv("KAAS_TLS_CERT"); cf != "" {
			kp, err := tls.LoadX509KeyPair(cf, os.Getenv("KAAS_TLS_KEY"))
			must(err, "KAAS_TLS_CERT/KAAS_TLS_KEY")
			tc.Certificates = []tls.Certificate{kp}
		}
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = tc
	}
	// SASL when KAAS_SASL_MECH is set (ci/sasl/test_sasl.sh).  KAAS_SASL_V0=1:
	// a 0.11 client, whose PLAIN goes by SaslHandshake v0 and unframed tokens.
	if mech := os.Getenv("KAAS_SASL_MECH"); mech != "" {
		c.Net.SASL.Enable = true
		c.Net.SASL.Handshake = true
		c.Net.SASL.Mechanism = sarama.SASLMechanism(mech)
		c.Net.SASL.User = os.Getenv("KAAS_SASL_USER")
		c.Net.SASL.Password = os.Getenv("KAAS_SASL_PASS")
		if strings.HasPrefix(mech, "SCRAM-SHA-") {
			h := sha256.New
			if mech == "SCRAM-SHA-512" {
				h = sha512.New
			}
			c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{h: h} }
		}
		if os.Getenv("KAAS_SASL_V0") == "1" {
			c.Version = sarama.V0_11_0_0
		}
	}
	return c
}

// scramClient is the client side of RFC 5802 for sarama, which leaves it to
// the application; written from the RFC, it checks the server's signature.
type scramClient struct {
	h                   func() hash.Hash
	user, pass          string
	cnonce, bare, nonce string
	serverSig           []byte
	step                int
}

func (s *scramClient) mac(key []byte, msg string) []byte {
	m := hmac.New(s.h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func (s *scramClient) pbkdf2(salt []byte, iter int) []byte {
	u := s.mac([]byte(s.pass), string(append(append([]byte{}, salt...), 0, 0, 0, 1)))
	out := append([]byte{}, u...)
	for i := 1; i < iter; i++ {
		u = s.mac([]byte(s.pass), string(u))
		for j := range out {
			out[j] ^= u[j]
		}
	}
	return out
}

func (s *scramClient) Begin(user, pass, authz string) error {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	s.user, s.pass, s.cnonce = user, pass, base64.RawURLEncoding.EncodeToString(b)
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) {
	s.step++
	switch s.step {
	case 1:
		name := strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s.user)
		s.bare = "n=" + name + ",r=" + s.cnonce
		return "n,," + s.bare, nil
	case 2:
		var salt []byte
		iter := 0
		for _, a := range strings.Split(challenge, ",") {
			switch {
			case strings.HasPrefix(a, "r="):
				s.nonce = a[2:]
			case strings.HasPrefix(a, "s="):
				salt, _ = base64.StdEncoding.DecodeString(a[2:])
			case strings.HasPrefix(a, "i="):
				iter, _ = strconv.Atoi(a[2:])
			}
		}
		if !strings.HasPrefix(s.nonce, s.cnonce) || len(salt) == 0 || iter < 4096 {
			return "", fmt.Errorf("bad server-first-message %q", challenge)
		}
		salted := s.pbkdf2(salt, iter)
		ck := s.mac(salted, "Client Key")
		hh := s.h()
		hh.Write(ck)
		stored := hh.Sum(nil)
		without := "c=biws,r=" + s.nonce
		auth := s.bare + "," + challenge + "," + without
		sig := s.mac(stored, auth)
		for i := range ck {
			ck[i] ^= sig[i]
		}
		s.serverSig = s.mac(s.mac(salted, "Server Key"), auth)
		return without + ",p=" + base64.StdEncoding.EncodeToString(ck), nil
	default:
		if challenge != "v="+base64.StdEncoding.EncodeToString(s.serverSig) {
			return "", fmt.Errorf("the server's signature %q is wrong", challenge)
		}
		return "", nil
	}
}

func (s *scramClient) Done() bool { return s.step >= 3 }

func appendLines(path string, lines []string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0644)
	must(err, "open "+path)
	for _, l := range lines {
		_, err = f.WriteString(l + "\n")
		must(err, "write "+path)
	}
	must(f.Close(), "close "+path)
}

func jsonLine(v interface{}) string {
	b, err := json.Marshal(v)
	must(err, "json")
	return string(b)
}

func admin(boot, topic string) {
	a, err := sarama.NewClusterAdmin([]string{boot}, config())
	must(err, "NewClusterAdmin")
	defer a.Close()
	ret := "3600000"
	must(a.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: nparts, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": &ret}}, false), "CreateTopic")
	err = a.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)
	check(err != nil, "creating %s twice succeeded", topic)
	md, err := a.DescribeTopics([]string{topic})
	must(err, "DescribeTopics")
	check(len(md) == 1 && md[0].Err == sarama.ErrNoError && len(md[0].Partitions) == nparts,
		"DescribeTopics %s: %+v", topic, md)
	entries, err := a.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	must(err, "DescribeConfig")
	found := false
	for _, e := range entries {
		if e.Name == "retention.ms" {
			found = e.Value == "3600000" && !e.Default
		}
	}
	check(found, "DescribeConfig: retention.ms override missing")
	must(a.CreateTopic("sr-scratch", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false), "CreateTopic scratch")
	must(a.DeleteTopic("sr-scratch"), "DeleteTopic")
	ok("sarama ClusterAdmin: CreateTopic (configs; twice refused), DescribeTopics, DescribeConfig, DeleteTopic")
}

func produce(boot, topic, recordsFile, out, codec string) {
	c := config()
	switch codec {
	case "zstd":
		c.Producer.Compression = sarama.CompressionZSTD
	case "snappy":
		c.Producer.Compression = sarama.CompressionSnappy
	case "lz4":
		c.Producer.Compression = sarama.CompressionLZ4
	case "gzip":
		c.Producer.Compression = sarama.CompressionGZIP
	}
	p, err := sarama.NewSyncProducer([]string{boot}, c)
	must(err, "NewSyncProducer")
	recs := readRecords(recordsFile)
	n := 0
	for first := 0; first < len(recs); first += 500 {
		var msgs []*sarama.ProducerMessage
		for _, r := range recs[first:min(first+500, len(recs))] {
			msgs = append(msgs, &sarama.ProducerMessage{
				Topic: topic, Key: encoder(unhx(r.K)), Value: encoder(unhx(r.V)),
				Headers: headersOf(r), Timestamp: time.Unix(0, r.Ts*int64(time.Millisecond)),
				Partition: int32(r.I % nparts), Metadata: r.I,
			})
		}
		must(p.SendMessages(msgs), "SendMessages")
		var lines []string
		for _, m := range msgs {
			lines = append(lines, jsonLine(map[string]interface{}{"i": m.Metadata, "p": m.Partition, "o": m.Offset}))
		}
		appendLines(out, lines)
		n += len(msgs)
	}
	must(p.Close(), "close producer")
	ok("%s: %d records acknowledged (SyncProducer, WaitForAll, %s)", topic, n, codec)
}

func consume(boot, topic, out string) {
	client, err := sarama.NewClient([]string{boot}, config())
	must(err, "NewClient")
	defer client.Close()
	cons, err := sarama.NewConsumerFromClient(client)
	must(err, "NewConsumer")
	defer cons.Close()
	parts, err := client.Partitions(topic)
	must(err, "Partitions")
	var lines []string
	for _, p := range parts {
		hw, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		must(err, "GetOffset newest")
		if hw == 0 {
			continue
		}
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		must(err, "ConsumePartition")
		deadline := time.After(120 * time.Second)
		for next := int64(-1); next < hw-1; {
			select {
			case m := <-pc.Messages():
				hs := [][]interface{}{}
				for _, h := range m.Headers {
					hs = append(hs, []interface{}{string(h.Key), hx(h.Value)})
				}
				lines = append(lines, jsonLine(map[string]interface{}{"p": m.Partition, "o": m.Offset,
					"k": hx(m.Key), "v": hx(m.Value), "h": hs, "ts": m.Timestamp.UnixNano() / int64(time.Millisecond)}))
				next = m.Offset
			case e := <-pc.Errors():
				check(false, "partition %d: %v", p, e)
			case <-deadline:
				check(false, "partition %d: stuck before offset %d", p, hw)
			}
		}
		must(pc.Close(), "close partition consumer")
	}
	os.Remove(out)
	appendLines(out, lines)
	ok("%s: consumed %d records from %d partitions with PartitionConsumer", topic, len(lines), len(parts))
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func times(boot, topic, out string, tss []string) {
	client, err := sarama.NewClient([]string{boot}, config())
	must(err, "NewClient")
	defer client.Close()
	var lines []string
	for _, s := range tss {
		ts, err := strconv.ParseInt(s, 10, 64)
		must(err, "time "+s)
		for p := int32(0); p < nparts; p++ {
			off, err := client.GetOffset(topic, p, ts)
			must(err, "GetOffset by time")
			lines = append(lines, jsonLine(map[string]interface{}{"ts": ts, "p": p, "o": off}))
		}
	}
	os.Remove(out)
	appendLines(out, lines)
	ok("%s: GetOffset by time for %d times", topic, len(tss))
}

func records(boot, topic string) {
	a, err := sarama.NewClusterAdmin([]string{boot}, config())
	must(err, "NewClusterAdmin")
	must(a.DeleteRecords(topic, map[int32]int64{0: 10}), "DeleteRecords")
	a.Close()
	client, err := sarama.NewClient([]string{boot}, config())
	must(err, "NewClient")
	defer client.Close()
	low, err := client.GetOffset(topic, 0, sarama.OffsetOldest)
	must(err, "GetOffset oldest")
	check(low == 10, "after DeleteRecords the oldest offset is %d, want 10", low)
	cons, err := sarama.NewConsumerFromClient(client)
	must(err, "NewConsumer")
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	must(err, "ConsumePartition")
	select {
	case m := <-pc.Messages():
		check(m.Offset == 10, "first record after DeleteRecords at offset %d", m.Offset)
	case e := <-pc.Errors():
		check(false, "consume after DeleteRecords: %v", e)
	case <-time.After(60 * time.Second):
		check(false, "nothing consumed after DeleteRecords")
	}
	pc.Close()
	cons.Close()
	ok("%s: DeleteRecords moved the log start to 10; OffsetOldest starts there", topic)
}

func main() {
	a := os.Args[1:]
	check(len(a) >= 3, "usage: sarama_e2e PHASE BOOT TOPIC ...")
	switch a[0] {
	case "admin":
		admin(a[1], a[2])
	case "produce":
		check(len(a) == 6, "usage: sarama_e2e produce BOOT TOPIC RECORDS OUT CODEC")
		produce(a[1], a[2], a[3], a[4], a[5])
	case "consume":
		consume(a[1], a[2], a[3])
	case "times":
		check(len(a) >= 4, "usage: sarama_e2e times BOOT TOPIC OUT TS...")
		times(a[1], a[2], a[3], a[4:])
	case "records":
		records(a[1], a[2])
	default:
		check(false, "unknown phase %s", a[0])
	}
}
