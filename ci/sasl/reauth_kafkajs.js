// reauth_kafkajs.js — kafkajs re-authenticating (KIP-368) on a broker with
// connections.max.reauth.ms: one producer sends a record every 250 ms for
// SECONDS on the same connection, then the topic's high watermark must count
// every one.  Needs NODE_PATH with kafkajs@2 and KAAS_SASL_* (kafkajs_e2e.js).
//   node reauth_kafkajs.js BOOT TOPIC SECONDS
'use strict'
const { Kafka, logLevel } = require('kafkajs')
const [boot, topic, seconds] = process.argv.slice(2)
const kafka = new Kafka({
  clientId: 'kaas-reauth-kafkajs',
  brokers: [boot],
  sasl: {
    mechanism: process.env.KAAS_SASL_MECH.toLowerCase(),
    username: process.env.KAAS_SASL_USER,
    password: process.env.KAAS_SASL_PASS
  },
  reauthenticationThreshold: 1000, // re-authenticate 1 s before the session ends
  logLevel: logLevel.NOTHING,
  retry: { retries: 0 } // a connection closed under it would show as a failure
})
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
async function main () {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] })
  const p = kafka.producer({ allowAutoTopicCreation: false, retry: { retries: 0 } })
  await p.connect()
  const end = Date.now() + Number(seconds) * 1000
  let n = 0
  while (Date.now() < end) {
    await p.send({ topic, acks: -1, messages: [{ value: 'r' + n }] })
    n++
    await sleep(250)
  }
  await p.disconnect()
  const offs = await admin.fetchTopicOffsets(topic)
  await admin.disconnect()
  if (Number(offs[0].high) !== n) {
    console.error('FAIL: high watermark', offs[0].high, 'after', n, 'acknowledged sends')
    process.exit(1)
  }
  console.log('ok', n, 'sends over', seconds, 's, all acknowledged')
}
main().catch((e) => {
  console.error('FAIL:', e.message)
  process.exit(1)
})
