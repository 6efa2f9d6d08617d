"""The rubric tier: a judge model scores preserved runs against a task's `rubric.md`, off unless
asked (`cbledger judge`). What it records is fenced from every deterministic number
(`cbledger.projections.judged`)."""
