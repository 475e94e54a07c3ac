/** The random targets of the sweep experiments (sweep-pass.ts, sweep-cost.ts): 80 % IPv4 /32, 20 % IPv6 /128. */
export function randomTarget (): { type: 'ip', value: string } {
  if (Math.random() < 0.8) {
    const n = Math.floor(Math.random() * 2 ** 30)
    return { type: 'ip', value: `${11 + (n >>> 24)}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}/32` }
  }
  const h = (): string => Math.floor(Math.random() * 65536).toString(16)
  return { type: 'ip', value: `2001:db8:${h()}:${h()}:${h()}:${h()}:${h()}:${h()}/128` }
}
