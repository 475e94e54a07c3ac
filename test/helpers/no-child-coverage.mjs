// Loaded into every test process (.taprc node-arg), after tap's coverage recorder has started:
// the processes a test spawns inherit this and record no coverage of their own. Children that run
// the sources under tsx transpile them differently from tap's TypeScript plugin, and tap's report
// merges coverage per file: two transpilations of one file made it drop that file from the report
// in some runs (which processes wrote first decided), so the coverage figure swung by 10 points
// between identical runs. Code run only in child processes is not counted (as .taprc says).
process.env._TAPJS_PROCESSINFO_COVERAGE_ = '0'
