// spec.js — the records of an interop run for the JavaScript clients: read
// from the file `spec.py records` writes (spec.py defines them; nothing
// here repeats the definition), and kafkajs's view of headers.  Keys,
// values and header values are Buffers or null.
'use strict'
const fs = require('fs')

const unhx = (s) => (s == null ? null : Buffer.from(s, 'hex'))

// [{ i, key, value, headers: [[name, Buffer], ...] in wire order, ts }, ...]
function readRecords (path) {
  return fs.readFileSync(path, 'utf8').split('\n').filter((l) => l.trim()).map((l) => {
    const r = JSON.parse(l)
    return { i: r.i, key: unhx(r.k), value: unhx(r.v), headers: r.h.map(([n, v]) => [n, unhx(v)]), ts: r.ts }
  })
}

// kafkajs takes headers as an object; a repeated name is an array value and
// is written as consecutive headers, so the order above survives.
function headersObject (list) {
  const o = {}
  for (const [n, v] of list) {
    if (n in o) o[n] = [].concat(o[n], v)
    else o[n] = v
  }
  return o
}

// ... and gives them back as an object, repeated names as arrays.
function headersList (obj) {
  const out = []
  for (const n of Object.keys(obj || {})) {
    const v = obj[n]
    for (const x of Array.isArray(v) ? v : [v]) out.push([n, x == null ? null : Buffer.from(x).toString('hex')])
  }
  return out
}

const hx = (b) => (b == null ? null : Buffer.from(b).toString('hex'))

module.exports = { readRecords, headersObject, headersList, hx }
