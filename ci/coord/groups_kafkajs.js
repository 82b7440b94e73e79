// ci/coord/groups_kafkajs.js — consumer groups with kafkajs 2 (pure
// JavaScript: its own JoinGroup/SyncGroup/Heartbeat/OffsetCommit code).
// Usage: node groups_kafkajs.js BROKER  (NODE_PATH points at kafkajs)
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const broker = process.argv[2];
const kafka = new Kafka({ clientId: 'kjs', brokers: [broker], logLevel: logLevel.NOTHING });
const TOPIC = 'jt';

function check(cond, what) {
  if (!cond) {
    console.error('FAIL: ' + what);
    process.exit(1);
  }
}

async function until(pred, ms, what) {
  const end = Date.now() + ms;
  while (!pred()) {
    check(Date.now() < end, 'timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function member(groupId, seen) {
  const c = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 });
  await c.connect();
  await c.subscribe({ topic: TOPIC, fromBeginning: true });
  await c.run({
    eachMessage: async ({ partition, message }) => {
      seen.push({ partition, value: message.value.toString() });
    },
  });
  return c;
}

async function offsetsOf(admin, groupId) {
  const res = await admin.fetchOffsets({ groupId, topics: [TOPIC] });
  return res[0].partitions.map((p) => Number(p.offset));
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: 2 }], waitForLeaders: true });

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const send = async (from, to) => {
    const messages = [];
    for (let i = from; i < to; i++) messages.push({ key: 'k' + i, value: 'v' + i });
    await producer.send({ topic: TOPIC, acks: -1, messages });
  };
  // Two members split the topic; together they see every record once.
  const a = [], b = [];
  const [ca, cb] = await Promise.all([member('jg', a), member('jg', b)]);
  const deadline = Date.now() + 60000;
  for (;;) {
    const g = (await admin.describeGroups(['jg'])).groups[0];
    if (g.state === 'Stable' && g.members.length === 2) break;
    check(Date.now() < deadline, 'no Stable group of two: ' + JSON.stringify(g));
    await new Promise((r) => setTimeout(r, 100));
  }
  await send(0, 50);
  console.log('ok idempotent kafkajs producer sent 50 records');
  await until(() => a.length + b.length >= 50, 60000, '50 records in the group');
  await new Promise((r) => setTimeout(r, 1000));
  const all = a.concat(b).map((m) => m.value).sort();
  check(all.length === 50 && new Set(all).size === 50, 'group consumed ' + all.length + ' records');
  const pa = new Set(a.map((m) => m.partition)), pb = new Set(b.map((m) => m.partition));
  check(a.length > 0 && b.length > 0, 'both members got a partition: ' + a.length + '/' + b.length);
  check([...pa].every((p) => !pb.has(p)), 'a partition was consumed by both members');
  await ca.disconnect();
  await cb.disconnect();
  console.log('ok two kafkajs members split the records: ' + a.length + ' + ' + b.length);

  const offs = await offsetsOf(admin, 'jg');
  check(offs.reduce((s, o) => s + o, 0) === 50, 'committed offsets ' + offs + ' do not add up to 50');
  const desc = await admin.describeGroups(['jg']);
  check(desc.groups[0].state === 'Empty' && desc.groups[0].protocolType === 'consumer',
    'describeGroups: ' + JSON.stringify(desc.groups[0]));
  const list = await admin.listGroups();
  check(list.groups.some((g) => g.groupId === 'jg' && g.protocolType === 'consumer'),
    'listGroups: ' + JSON.stringify(list.groups));
  console.log('ok fetchOffsets ' + offs + ', describeGroups Empty, listGroups shows the group');

  // A new member resumes at the committed offsets: only new records.
  const c = [];
  const cc = await member('jg', c);
  await send(50, 55);
  await until(() => c.length >= 5, 60000, '5 new records');
  await new Promise((r) => setTimeout(r, 1000));
  check(JSON.stringify(c.map((m) => m.value).sort()) === JSON.stringify(['v50', 'v51', 'v52', 'v53', 'v54']),
    'resumed member read ' + JSON.stringify(c.map((m) => m.value)));
  await cc.disconnect();
  console.log('ok a new member resumed at the committed offsets');

  // DeleteGroups forgets the offsets.
  await admin.deleteGroups(['jg']);
  const gone = await offsetsOf(admin, 'jg');
  check(gone.every((o) => o === -1), 'offsets after deleteGroups: ' + gone);
  let refused = false;
  try {
    await admin.deleteGroups(['never-was']);
  } catch (e) {
    refused = /does not exist|GROUP_ID_NOT_FOUND/i.test(JSON.stringify(e.groups || e.message));
  }
  check(refused, 'deleteGroups of an unknown group did not fail with GROUP_ID_NOT_FOUND');
  console.log('ok deleteGroups removes the offsets; unknown groups are GROUP_ID_NOT_FOUND');

  await producer.disconnect();
  await admin.disconnect();
}

main().then(() => process.exit(0), (e) => {
  console.error('FAIL: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
