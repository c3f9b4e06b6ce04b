#!/usr/bin/env node
// The peer of `tensorbatch corpus build` for its bench row (issue 38): a
// single-process loop that tokenizes the same JSONL with the same
// tokenizer, as Megatron's tools/preprocess_data.py does with one worker.
// Python has no tiktoken on this machine (no pip), so the loop is Node.js
// with js-tiktoken, the JavaScript tiktoken that the corpus tests check the
// tokens against. It reads the file line by line, parses each line's JSON,
// encodes the text under the key as tiktoken's encode_ordinary does, and
// counts the tokens; it writes no corpus (which favours it). Prints one
// JSON record.
//
//   node scripts/peer_tokenize.js ENCODING FILE.jsonl [KEY]
//   node scripts/peer_tokenize.js make FILE.jsonl MIB
//
// ENCODING is r50k_base, p50k_base, cl100k_base or o200k_base; KEY is
// "text" unless given. js-tiktoken comes from .cache/npm of the repository
// (scripts/install-deps.sh). seconds is the loop's time, from the first
// byte read to the last token; load_seconds, the encoding's load before it.
//
// make writes the bench's input, about MIB MiB of JSONL {"text": ...}:
// documents of up to 8192 characters cut from the prose (.md, .txt, .rst)
// and the code (.go, .py, .c, .h) on this machine (the Go module cache,
// GOROOT, /usr/share/doc, /usr/lib/python3), prose and code in turn, the
// prose repeated as needed. The same machine gives the same file.

const fs = require('node:fs')
const path = require('node:path')
const readline = require('node:readline')
const { createRequire } = require('node:module')

// files returns the files under roots whose names end in one of exts,
// in a fixed order.
function files (roots, exts) {
  const out = []
  const walk = dir => {
    let entries
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true })
    } catch {
      return
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const e of entries) {
      const p = path.join(dir, e.name)
      if (e.isDirectory()) walk(p)
      else if (e.isFile() && exts.some(x => e.name.endsWith(x))) out.push(p)
    }
  }
  roots.forEach(walk)
  return out
}

// documents yields the texts of paths, cut into pieces of up to 8192
// characters (not inside a surrogate pair), skipping blank ones and files
// that are not UTF-8.
function * documents (paths) {
  const decoder = new TextDecoder('utf-8', { fatal: true })
  for (const p of paths) {
    let text
    try {
      text = decoder.decode(fs.readFileSync(p))
    } catch {
      continue
    }
    for (let i = 0; i < text.length;) {
      let j = Math.min(i + 8192, text.length)
      if (j < text.length && text.charCodeAt(j - 1) >= 0xd800 && text.charCodeAt(j - 1) < 0xdc00) j--
      const doc = text.slice(i, j)
      if (doc.trim() !== '') yield doc
      i = j
    }
  }
}

// make writes about mib MiB of JSONL documents to file.
function make (file, mib) {
  const gomod = path.join(process.env.HOME || '/root', 'go', 'pkg', 'mod')
  const prose = files([gomod, '/usr/local/go', '/usr/share/doc'], ['.md', '.txt', '.rst'])
  const code = files(['/usr/local/go/src', '/usr/lib/python3'], ['.go', '.py', '.c', '.h'])
  const out = fs.openSync(file, 'w')
  let p = documents(prose)
  const c = documents(code)
  let n = 0
  const target = mib * (1 << 20)
  while (n < target) {
    let d = p.next()
    if (d.done) {
      p = documents(prose)
      d = p.next()
    }
    for (const text of [d.value, c.next().value]) {
      if (text === undefined) throw new Error('out of code to cut documents from')
      const line = JSON.stringify({ text }) + '\n'
      fs.writeSync(out, line)
      n += Buffer.byteLength(line)
    }
  }
  fs.closeSync(out)
}

async function main () {
  if (process.argv[2] === 'make') {
    make(process.argv[3], Number(process.argv[4]))
    return
  }
  const [encoding, file, key = 'text'] = process.argv.slice(2)
  if (!encoding || !file) {
    console.error('usage: node scripts/peer_tokenize.js ENCODING FILE.jsonl [KEY] | make FILE.jsonl MIB')
    process.exit(2)
  }
  const modules = path.join(__dirname, '..', '.cache', 'npm', 'node_modules')
  const { getEncoding } = createRequire(path.join(modules, '.peer.js'))('js-tiktoken')
  const version = JSON.parse(fs.readFileSync(path.join(modules, 'js-tiktoken', 'package.json'))).version

  let t0 = process.hrtime.bigint()
  const enc = getEncoding(encoding)
  enc.encode('warm up', [], [])
  const loadSeconds = Number(process.hrtime.bigint() - t0) / 1e9

  t0 = process.hrtime.bigint()
  const lines = readline.createInterface({ input: fs.createReadStream(file), crlfDelay: Infinity })
  let documents = 0
  let tokens = 0
  for await (const line of lines) {
    if (line.trim() === '') continue
    const text = JSON.parse(line)[key]
    tokens += enc.encode(text, [], []).length
    documents++
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9
  console.log(JSON.stringify({
    peer: 'js-tiktoken ' + version + ', node ' + process.version,
    encoding,
    documents,
    tokens,
    bytes: fs.statSync(file).size,
    seconds,
    tokens_per_second: tokens / seconds,
    load_seconds: loadSeconds
  }))
}

main().catch(err => { console.error(err); process.exit(1) })
