// spec.js — record i of an interop run, as spec.py defines it (keep the two
// in step).  Keys, values and header values are Buffers or null.
'use strict'

function keyOf (run, i) {
  if (i % 101 === 7) return null
  return Buffer.from(`${run}-k${i}`)
}

function valueOf (run, i) {
  if (i % 211 === 13) return null
  if (i % 53 === 11) return Buffer.alloc(0)
  const tail = Buffer.alloc(i % 64)
  for (let j = 0; j < tail.length; j++) tail[j] = (i * 7 + j) % 256
  return Buffer.concat([Buffer.from(`${run}-v${i}-`), tail])
}

// [[name, Buffer], ...] in wire order.
function headersOf (run, i) {
  if (i % 10 === 3) return []
  const h = [['seq', Buffer.from(String(i))]]
  if (i % 17 === 0) h.push(['seq', Buffer.from('dup')])
  h.push(['run', Buffer.from(run)])
  if (i % 5 === 0) h.push(['bin', Buffer.from([i % 256, 0, 255])])
  return h
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

module.exports = { keyOf, valueOf, headersOf, headersObject, headersList, hx }
