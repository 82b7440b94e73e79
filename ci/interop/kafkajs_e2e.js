// kafkajs_e2e.js — kafkajs 2 (pure JavaScript) against kaas, in phases that
// test_kafkajs.sh runs around broker restarts.  Needs NODE_PATH to hold an
// `npm install kafkajs@2`.
//
//   produce BOOT TOPIC RECORDS OUT [--idempotent] [--gzip]
//       the records of the file RECORDS (`spec.py records`) in sends of 250
//       (record i to partition i % 3, acks=-1); offsets of each record from
//       its partition's baseOffset; appended to OUT ({"i", "p", "o"}).
//   group BOOT TOPIC GROUP N OUT PROGRESS GO
//       a consumer-group member (subscribe, fromBeginning, eachMessage)
//       until it has N distinct records.  Half-way it writes PROGRESS and
//       waits inside eachMessage until the file GO exists, and at the last
//       record the same with PROGRESS.2 and GO.2 (the test restarts the
//       broker meanwhile), then it closes at once.  The member keeps its
//       place in the group across the restarts and kafkajs commits after
//       every batch, so no record is delivered twice; the final commit, sent
//       right after the second restart, is kept: the group's committed
//       offsets end at the high watermarks.
//   times BOOT TOPIC OUT TS...
//       admin.fetchTopicOffsetsByTimestamp for the times TS... (`spec.py times`)
//   admin BOOT DATA / admin-after BOOT DATA
//       the admin API, then what survives a restart.
'use strict'
const fs = require('fs')
const path = require('path')
const { Kafka, logLevel, CompressionTypes, ConfigResourceTypes } = require('kafkajs')
const spec = require('./spec.js')

const [phase, boot, ...args] = process.argv.slice(2)
// TLS when KAAS_TLS_CA is set (ci/tls/test_tls.sh); KAAS_TLS_CERT/KEY: mutual.
const tls = process.env.KAAS_TLS_CA
  ? {
      ca: [fs.readFileSync(process.env.KAAS_TLS_CA)],
      ...(process.env.KAAS_TLS_CERT
        ? { cert: fs.readFileSync(process.env.KAAS_TLS_CERT), key: fs.readFileSync(process.env.KAAS_TLS_KEY) }
        : {})
    }
  : undefined
// SASL when KAAS_SASL_MECH is set (ci/sasl/test_sasl.sh), over TLS with KAAS_TLS_CA.
const sasl = process.env.KAAS_SASL_MECH
  ? {
      mechanism: process.env.KAAS_SASL_MECH.toLowerCase(),
      username: process.env.KAAS_SASL_USER,
      password: process.env.KAAS_SASL_PASS
    }
  : undefined
const kafka = new Kafka({
  clientId: 'kaas-interop-kafkajs',
  brokers: [boot],
  ssl: tls,
  sasl,
  logLevel: process.env.KJ_LOG ? logLevel[process.env.KJ_LOG] : logLevel.NOTHING,
  retry: { retries: 20, initialRetryTime: 200, maxRetryTime: 3000 }
})

function check (cond, what) {
  if (!cond) {
    console.error('FAIL:', what)
    process.exit(1)
  }
}
const ok = (what) => console.log('ok', what)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const NPART = 3

async function produce () {
  const [topic, recordsFile, out, ...flags] = args
  const records = spec.readRecords(recordsFile)
  const idem = flags.includes('--idempotent')
  const p = kafka.producer({ idempotent: idem, maxInFlightRequests: idem ? 1 : 5, allowAutoTopicCreation: true })
  await p.connect()
  const lines = []
  for (let from = 0; from < records.length; from += 250) {
    const batch = records.slice(from, from + 250)
    const ids = batch.map((r) => r.i)
    const messages = batch.map((r) => ({
      key: r.key,
      value: r.value,
      headers: spec.headersObject(r.headers),
      timestamp: String(r.ts),
      partition: r.i % NPART
    }))
    const res = await p.send({
      topic,
      acks: -1,
      compression: flags.includes('--gzip') ? CompressionTypes.GZIP : CompressionTypes.None,
      messages
    })
    const base = {}
    for (const r of res) {
      check(r.errorCode === 0, `send: error ${r.errorCode}`)
      base[r.partition] = Number(r.baseOffset)
    }
    const next = {}
    for (const i of ids) {
      const part = i % NPART
      next[part] = next[part] || 0
      lines.push(JSON.stringify({ i, p: part, o: base[part] + next[part]++ }))
    }
  }
  await p.disconnect()
  fs.appendFileSync(out, lines.join('\n') + '\n')
  ok(`${topic}: ${lines.length} records acknowledged (acks=-1${idem ? ', idempotent' : ''}${flags.includes('--gzip') ? ', gzip' : ''})`)
}

async function group () {
  const [topic, groupId, ns, out, progress, go] = args
  const n = Number(ns)
  // Small fetches, so that most of the records are fetched after the restart.
  const c = kafka.consumer({ groupId, maxWaitTimeInMs: 100, maxBytesPerPartition: 16384, sessionTimeout: 10000, heartbeatInterval: 1000 })
  const seen = new Map()
  let redelivered = 0
  let done
  const pauseAt = async (suffix) => {
    fs.writeFileSync(progress + suffix, String(seen.size))
    for (let w = 0; w < 1200 && !fs.existsSync(go + suffix); w++) await sleep(50)
  }
  const finished = new Promise((resolve) => { done = resolve })
  await c.connect()
  await c.subscribe({ topic, fromBeginning: true })
  await c.run({
    eachMessage: async ({ partition, message }) => {
      const rec = {
        p: partition,
        o: Number(message.offset),
        k: spec.hx(message.key),
        v: spec.hx(message.value),
        h: spec.headersList(message.headers),
        ts: Number(message.timestamp)
      }
      const k = `${rec.p}:${rec.o}`
      if (seen.has(k)) {
        redelivered++
        check(JSON.stringify(seen.get(k)) === JSON.stringify(rec), `redelivered ${k} differs from the first delivery`)
      } else {
        seen.set(k, rec)
        if (seen.size === Math.floor(n / 2)) await pauseAt('')
        if (seen.size === n) await pauseAt('.2')
      }
      if (seen.size >= n) done()
    }
  })
  const timeout = setTimeout(() => check(false, `group: ${seen.size} of ${n} records after 180 s`), 180000)
  await finished
  clearTimeout(timeout)
  await c.disconnect() // commits what was consumed
  fs.writeFileSync(out, [...seen.values()].map((r) => JSON.stringify(r)).join('\n') + '\n')
  check(redelivered === 0, `${redelivered} records delivered twice across the broker restarts`)
  const admin = kafka.admin()
  await admin.connect()
  const hw = await admin.fetchTopicOffsets(topic)
  const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] })
  for (const { partition, high } of hw) {
    const c0 = committed.partitions.find((x) => x.partition === partition)
    check(c0 && c0.offset === high, `group ${groupId}: committed ${c0 && c0.offset} for partition ${partition}, high watermark ${high}`)
  }
  const groups = await admin.describeGroups([groupId])
  check(groups.groups[0].state === 'Empty' && groups.groups[0].protocolType === 'consumer',
    `describeGroups after the member left: ${JSON.stringify(groups.groups[0])}`)
  await admin.disconnect()
  ok(`group ${groupId}: ${seen.size} records, none twice across two broker restarts, committed = high watermarks (final commit right after a restart)`)
}

async function times () {
  const [topic, out, ...tss] = args
  const admin = kafka.admin()
  await admin.connect()
  const hw = {}
  for (const { partition, high } of await admin.fetchTopicOffsets(topic)) hw[partition] = high
  const lines = []
  for (const t of tss) {
    const ts = Number(t)
    for (const { partition, offset } of await admin.fetchTopicOffsetsByTimestamp(topic, ts)) {
      // kafkajs reports "no record at or after ts" as the high watermark.
      lines.push(JSON.stringify({ ts, p: partition, o: offset === hw[partition] ? -1 : Number(offset) }))
    }
  }
  await admin.disconnect()
  fs.writeFileSync(out, lines.join('\n') + '\n')
  ok(`${topic}: fetchTopicOffsetsByTimestamp for ${tss.length} times`)
}

async function adminPhase () {
  const [data] = args
  const a = kafka.admin()
  await a.connect()
  const cluster = await a.describeCluster()
  check(cluster.brokers.length === 1 && cluster.controller === cluster.brokers[0].nodeId && cluster.clusterId,
    `describeCluster: ${JSON.stringify(cluster)}`)
  check(await a.createTopics({
    waitForLeaders: true,
    topics: [{ topic: 'kj-admin', numPartitions: 2, configEntries: [{ name: 'retention.ms', value: '7200000' }] }]
  }), 'createTopics kj-admin')
  check(!(await a.createTopics({ topics: [{ topic: 'kj-admin', numPartitions: 2 }] })),
    'createTopics of an existing topic returns false')
  let err = null
  try {
    await a.createTopics({ topics: [{ topic: '../kj', numPartitions: 1 }] })
  } catch (e) { err = e }
  check(err && JSON.stringify(err.errors || err.message).includes('INVALID_TOPIC_EXCEPTION'),
    `createTopics ../kj: ${err}`)
  check(!fs.existsSync(path.join(data, '..', 'kj')), '../kj touched the disk')
  const md = await a.fetchTopicMetadata({ topics: ['kj-admin'] })
  check(md.topics[0].partitions.length === 2, 'kj-admin has 2 partitions')
  const cfg = await a.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: 'kj-admin', configNames: ['retention.ms', 'cleanup.policy'] }]
  })
  const entries = Object.fromEntries(cfg.resources[0].configEntries.map((e) => [e.configName, e]))
  check(entries['retention.ms'].configValue === '7200000' && !entries['retention.ms'].isDefault,
    'describeConfigs: retention.ms override')
  check(entries['cleanup.policy'].configValue === 'delete', 'describeConfigs: cleanup.policy')
  check(cfg.resources[0].configEntries.length === 2, 'describeConfigs with configNames returns only those')
  await a.alterConfigs({
    validateOnly: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: 'kj-admin', configEntries: [{ name: 'retention.bytes', value: '1048576' }] }]
  })
  await a.createPartitions({ topicPartitions: [{ topic: 'kj-admin', count: 4 }] }) // throws on an error
  // (also refreshes the admin's metadata, which deleteTopicRecords uses as it is)
  const md4 = await a.fetchTopicMetadata({ topics: ['kj-admin'] })
  check(md4.topics[0].partitions.length === 4, 'kj-admin has 4 partitions after createPartitions')

  const p = kafka.producer()
  await p.connect()
  await p.send({ topic: 'kj-admin', acks: -1, messages: [0, 1, 2, 3].map((i) => ({ partition: 3, value: `r${i}` })) })
  await p.disconnect()
  await a.deleteTopicRecords({ topic: 'kj-admin', partitions: [{ partition: 3, offset: '2' }] })
  const offs = await a.fetchTopicOffsets('kj-admin')
  const p3 = offs.find((x) => x.partition === 3)
  check(offs.length === 4 && p3.low === '2' && p3.high === '4', `after deleteTopicRecords: ${JSON.stringify(offs)}`)
  await a.disconnect()
  ok('kafkajs admin: describeCluster, createTopics (exists, invalid name), fetchTopicMetadata, describeConfigs (configNames), alterConfigs, createPartitions, deleteTopicRecords, fetchTopicOffsets')
}

async function adminAfter () {
  const a = kafka.admin()
  await a.connect()
  const cfg = await a.describeConfigs({
    includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: 'kj-admin' }]
  })
  const entries = Object.fromEntries(cfg.resources[0].configEntries.map((e) => [e.configName, e.configValue]))
  check(entries['retention.bytes'] === '1048576' && entries['retention.ms'] === '604800000',
    `alterConfigs replaced the overrides and survived the restart: ${entries['retention.bytes']} ${entries['retention.ms']}`)
  const offs = await a.fetchTopicOffsets('kj-admin')
  check(offs.length === 4 && offs.find((x) => x.partition === 3).low === '2', 'partitions and low watermark survived')
  const { groups } = await a.listGroups()
  check(groups.some((g) => g.groupId === 'kj-group'), `listGroups: ${JSON.stringify(groups)}`)
  const del = await a.deleteGroups(['kj-group'])
  check(del[0].errorCode === 0, `deleteGroups: ${JSON.stringify(del)}`)
  await a.deleteTopics({ topics: ['kj-admin'] })
  check(!(await a.listTopics()).includes('kj-admin'), 'deleteTopics kj-admin')
  await a.disconnect()
  ok('kafkajs admin after the restart: configs, partitions, low watermark kept; listGroups, deleteGroups, deleteTopics')
}

const phases = { produce, group, times, admin: adminPhase, 'admin-after': adminAfter }
check(phases[phase], `unknown phase ${phase}`)
phases[phase]().catch((e) => {
  console.error('FAIL:', phase, e, JSON.stringify(e))
  process.exit(1)
})
