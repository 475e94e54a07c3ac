/**
 * The one import of uWebSockets.js's value: the environment it reads at load is set first
 * (uws-env.ts), and the `uWebSockets: 20` header it adds to every answer is switched off, since
 * it tells a client the stack and nothing else. `_cfg('silent')` is the build's switch for that
 * mark (uWebSockets.js 20.x, not in its typings); test/http/library-answers.test.ts pins both.
 */
import './uws-env.js'
import uWS from 'uWebSockets.js'

(uWS as unknown as { _cfg: (setting: string) => void })._cfg('silent')

export default uWS
