/**
 * Settings uWebSockets.js reads from the environment, set before the library loads: its native
 * code reads `UWS_HTTP_MAX_HEADERS_SIZE` once, in a static initializer run when the addon is
 * loaded, so a value set later (or per App) has no effect. Imported by uws.ts ahead of the
 * library; nothing else may import 'uWebSockets.js' for its value.
 */

/**
 * The most bytes of request line plus headers uWS parses (its default is 4096). 16 KiB is
 * Node's own default (--max-http-header-size) and nginx's largest header line
 * (large_client_header_buffers 4 8k): it holds a 4 KB Authorization, an If-None-Match list of a
 * hundred ETags and an 8 KB URL, while a request over it still costs a connection at most this
 * much buffer before uWS answers 431 and closes.
 */
export const MAX_HEADERS_SIZE = 16_384

// An operator's explicit value wins; the server sets its own otherwise.
process.env.UWS_HTTP_MAX_HEADERS_SIZE ??= String(MAX_HEADERS_SIZE)
