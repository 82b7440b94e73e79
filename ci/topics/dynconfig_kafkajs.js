// ci/topics/dynconfig_kafkajs.js — dynamic broker configs through kafkajs 2
// (its own AlterConfigs/DescribeConfigs code; it sends a broker resource to
// the broker it names).  Usage: node dynconfig_kafkajs.js PHASE BOOTSTRAP
//   override  broker 2's own log.retention.ms=-1; a static-only setting
//             refused (INVALID_REQUEST); broker 2 describes -1 as DYNAMIC_BROKER_CONFIG,
//             broker 1 does not have it
//   after     after restarts: broker 2 still describes its value, with the
//             cluster default as its next synonym
//   drop      AlterConfigs with no entries: broker 2's set is empty again
'use strict';
const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs');

const phase = process.argv[2];
const kafka = new Kafka({ clientId: 'dynjs', brokers: process.argv[3].split(','), logLevel: logLevel.NOTHING });
const HOUR = '3600000';

function check(cond, what) {
  if (!cond) {
    console.error('FAIL: ' + what);
    process.exit(1);
  }
}

async function describe(admin, id) {
  const r = await admin.describeConfigs({
    resources: [{ type: ConfigResourceTypes.BROKER, name: String(id), configNames: ['log.retention.ms'] }],
    includeSynonyms: true,
  });
  const e = r.resources[0].configEntries.find((c) => c.configName === 'log.retention.ms');
  check(e, 'broker ' + id + ' describes log.retention.ms');
  return e;
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  if (phase === 'override') {
    await admin.alterConfigs({
      resources: [{ type: ConfigResourceTypes.BROKER, name: '2',
        configEntries: [{ name: 'log.retention.ms', value: '-1' }] }],
    });
    let refused = null;
    try {
      await admin.alterConfigs({
        resources: [{ type: ConfigResourceTypes.BROKER, name: '1',
          configEntries: [{ name: 'num.io.threads', value: '2' }] }],
      });
    } catch (e) {
      refused = e;
    }
    // kafkajs keeps only the error code of an AlterConfigs response (not its
    // message): the name is checked through the other two clients.
    check(refused && refused.type === 'INVALID_REQUEST' && refused.code === 42,
      'num.io.threads refused with INVALID_REQUEST, got ' + (refused && refused.message));
    const e2 = await describe(admin, 2);
    check(e2.configValue === '-1' && e2.configSource === 2, 'broker 2: ' + JSON.stringify(e2));
    check(e2.readOnly === false, 'broker 2: log.retention.ms is not read-only');
    const e1 = await describe(admin, 1);
    check(e1.configValue === '604800000' && e1.configSource === 5, 'broker 1 unaffected: ' + JSON.stringify(e1));
    console.log('ok kafkajs: broker 2 alone has log.retention.ms=-1 (DYNAMIC_BROKER_CONFIG); num.io.threads refused (INVALID_REQUEST)');
  } else if (phase === 'after') {
    const e2 = await describe(admin, 2);
    const syn = e2.configSynonyms.map((s) => [s.configValue, s.configSource]);
    check(e2.configValue === '-1' && e2.configSource === 2, 'broker 2 after its restart: ' + JSON.stringify(e2));
    check(syn.length >= 3 && syn[1][0] === HOUR && syn[1][1] === 3, 'broker 2 synonyms: ' + JSON.stringify(syn));
    const e3 = await describe(admin, 3);
    check(e3.configValue === HOUR && e3.configSource === 3, 'broker 3: ' + JSON.stringify(e3));
    console.log('ok kafkajs: after the restarts broker 2 keeps -1 over the default ' + HOUR + ', broker 3 has the default');
  } else if (phase === 'drop') {
    await admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.BROKER, name: '2', configEntries: [] }] });
    const e2 = await describe(admin, 2);
    check(e2.configValue === HOUR && e2.configSource === 3, 'broker 2 after the drop: ' + JSON.stringify(e2));
    console.log('ok kafkajs: broker 2\'s own set emptied, it follows the cluster default');
  } else {
    check(false, 'unknown phase ' + phase);
  }
  await admin.disconnect();
}

main().catch((e) => {
  console.error('FAIL: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
