// ci/coord/txn_refused.js — a kafkajs transactional producer is refused at
// once (not retried until its own timeout).
// Usage: node txn_refused.js BROKER  (NODE_PATH points at kafkajs)
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const kafka = new Kafka({ clientId: 'kjs-txn', brokers: [process.argv[2]], logLevel: logLevel.NOTHING });

function check(cond, what) {
  if (!cond) {
    console.error('FAIL: ' + what);
    process.exit(1);
  }
}

(async () => {
  const p = kafka.producer({ transactionalId: 'tx-js', idempotent: true, maxInFlightRequests: 1 });
  const t0 = Date.now();
  let failed = null;
  try {
    await p.connect();
    const txn = await p.transaction();
    await txn.abort();
  } catch (e) {
    failed = e;
  }
  const took = (Date.now() - t0) / 1000;
  check(failed, 'a transaction started on a broker without transactions');
  console.log(`kafkajs: transactional producer failed after ${took.toFixed(2)} s: ` +
              `${failed.name} retriable=${failed.retriable}: ${failed.message}`);
  check(failed.retriable === false, 'the refusal is retriable');
  check(took < 10, `the refusal took ${took} s`);
  await p.disconnect();
})().catch((e) => {
  console.error('FAIL: ' + (e.stack || e));
  process.exit(1);
});
