// acl_kafkajs.js — kafkajs 2's admin ACL calls against kaas, for
// test_acl.sh.  Needs NODE_PATH to hold an `npm install kafkajs@2`.
// SASL PLAIN as KAAS_SASL_USER / KAAS_SASL_PASS.
//
//   create BOOT JSON   JSON: [{resourceType, resourceName, resourcePatternType,
//                      principal, host, operation, permissionType}] with the
//                      enum names (TOPIC, LITERAL, WRITE, ALLOW ...)
//   describe BOOT JSON JSON: one filter the same way (ANY where left out);
//                      prints the bindings found, one JSON object a line
//   delete BOOT JSON   JSON: [filter]; prints the bindings deleted
// Exits 3 with the error's type on stdout when kafkajs throws one.
'use strict'
const { Kafka, logLevel, AclResourceTypes, AclOperationTypes, AclPermissionTypes, ResourcePatternTypes } =
  require('kafkajs')

const [cmd, boot, json] = process.argv.slice(2)
const kafka = new Kafka({
  clientId: 'acl-kafkajs',
  brokers: boot.split(','),
  logLevel: logLevel.NOTHING,
  retry: { retries: 0 },
  sasl: { mechanism: 'plain', username: process.env.KAAS_SASL_USER, password: process.env.KAAS_SASL_PASS }
})

const codes = (o, filter) => ({
  resourceType: AclResourceTypes[o.resourceType || 'ANY'],
  resourceName: o.resourceName === undefined ? (filter ? null : '') : o.resourceName,
  resourcePatternType: ResourcePatternTypes[o.resourcePatternType || (filter ? 'ANY' : 'LITERAL')],
  principal: o.principal === undefined ? null : o.principal,
  host: o.host === undefined ? '*' : o.host, // kafkajs wants a string, also in filters
  operation: AclOperationTypes[o.operation || 'ANY'],
  permissionType: AclPermissionTypes[o.permissionType || 'ANY']
})
const name = (tab, v) => Object.keys(tab).find((k) => tab[k] === v)
const show = (r, a) =>
  JSON.stringify({
    resourceType: name(AclResourceTypes, r.resourceType),
    resourceName: r.resourceName,
    resourcePatternType: name(ResourcePatternTypes, r.resourcePatternType),
    principal: a.principal,
    host: a.host,
    operation: name(AclOperationTypes, a.operation),
    permissionType: name(AclPermissionTypes, a.permissionType)
  })

const main = async () => {
  const admin = kafka.admin()
  await admin.connect()
  try {
    const arg = JSON.parse(json)
    if (cmd === 'create') {
      await admin.createAcls({ acl: arg.map((o) => codes(o, false)) })
      console.log('created ' + arg.length)
    } else if (cmd === 'describe') {
      const r = await admin.describeAcls(codes(arg, true))
      for (const res of r.resources) for (const a of res.acls) console.log(show(res, a))
    } else if (cmd === 'delete') {
      const r = await admin.deleteAcls({ filters: arg.map((o) => codes(o, true)) })
      for (const f of r.filterResponses) {
        if (f.errorCode) throw Object.assign(new Error(f.errorMessage), { type: 'code ' + f.errorCode })
        for (const m of f.matchingAcls) console.log(show(m, m))
      }
    } else {
      throw new Error('unknown command ' + cmd)
    }
  } finally {
    await admin.disconnect()
  }
}
main().catch((e) => {
  const inner = e.originalError || e.cause || {}
  console.log([e.type, inner.type, e.name, String(e), String(inner.message || '')].filter(Boolean).join(' '))
  console.error(String(e))
  process.exit(3)
})
