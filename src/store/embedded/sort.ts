/** Admin listings come back oldest first, ties broken by id, so both backends agree on order. */
export function byCreation (a: { createdAt: number, id: string }, b: { createdAt: number, id: string }): number {
  return a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
}
