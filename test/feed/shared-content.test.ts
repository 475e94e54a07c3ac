import t from 'tap'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { SharedContent } from '../../src/feed/shared-content.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

t.test('intern: the held bytes while someone holds them, made (once) otherwise', async (t) => {
  const shared = new SharedContent()
  let made = 0
  const make = (): Uint8Array => { made++; return Uint8Array.of(1, 2, 3) }
  const a = shared.intern('t:one', make)
  const b = shared.intern('t:one', make)
  t.equal(b, a, 'the same object')
  t.equal(made, 1)
  t.equal(shared.get('t:one'), a)
  t.not(shared.intern('t:two', make), a, 'another key, other bytes')
  t.equal(shared.get('t:three'), undefined)
})

t.test('an entry goes with the last holder of its bytes: the table keeps nothing alive', async (t) => {
  const shared = new SharedContent()
  let held: Uint8Array | null = shared.intern('z:chunk', () => new Uint8Array(1 << 20))
  t.equal(shared.size, 1)
  t.ok(held.length > 0)
  held = null
  // FinalizationRegistry callbacks run after a GC, in a later task.
  for (let i = 0; i < 20 && shared.size > 0; i++) {
    gc()
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  t.equal(shared.get('z:chunk'), undefined)
  t.equal(shared.size, 0, 'the dead key is dropped')
  let made = 0
  shared.intern('z:chunk', () => { made++; return new Uint8Array(4) })
  t.equal(made, 1, 'made again when asked again')
})
