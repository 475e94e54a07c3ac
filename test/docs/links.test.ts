/**
 * Every relative link of README.md and docs/*.md names a file of the repository, and every
 * `#anchor` one of the target page's headings (GitHub's slugs): moving a fact must not leave a
 * dangling pointer behind. Nothing points outside the repository's tree (no `../shared`).
 */
import t from 'tap'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../../', import.meta.url))
const pages = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function anchors (text: string): Set<string> {
  const out = new Set<string>()
  for (const m of text.replace(/```[\s\S]*?```/g, '').matchAll(/^#{1,6} (.+)$/gm)) {
    out.add(m[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-'))
  }
  return out
}

for (const page of pages) {
  t.test(page, async (t) => {
    const text = readFileSync(join(root, page), 'utf8')
    const prose = text.replace(/```[\s\S]*?```/g, '')
    t.notMatch(prose, /\.\.\/shared|SPEC\.md|DECISIONS\.md/, 'nothing outside the repository')
    for (const m of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
      const link = m[1]!
      if (/^[a-z]+:/.test(link)) continue
      const [file, anchor] = link.split('#') as [string, string | undefined]
      const target = file === '' ? join(root, page) : join(dirname(join(root, page)), file)
      t.ok(existsSync(target), `${link}: ${relative(root, target)} exists`)
      if (anchor !== undefined && existsSync(target) && target.endsWith('.md')) {
        t.ok(anchors(readFileSync(target, 'utf8')).has(anchor), `${link}: the heading #${anchor} exists`)
      }
    }
  })
}
