"""The article's A/B pattern with the Python SDK: do some work, checkpoint, fork two sessions, try a
different strategy in each, keep the winner by restoring the original session to its checkpoint.
Run against a running platform: SPACE_API_URL=http://127.0.0.1:7070 SPACE_API_KEY=... python3 examples/ab-fork.py
"""

import os
from concurrent.futures import ThreadPoolExecutor

from space import Space

space = Space()
session = space.sessions.create(template=os.environ.get("SPACE_EXAMPLE_TEMPLATE", "base"))
print(f"session {session.id}")
try:
    session.exec('mkdir -p app && printf "step 1\\nstep 2\\n" > app/progress.txt')
    step = session.checkpoint(kind="fs")
    print(f"checkpoint {step['id']} at step N")

    a, b = space.checkpoints.fork(step["id"], count=2)
    strategies = [(a, 'echo "strategy A: rewrite" >> app/progress.txt && false'), (b, 'echo "strategy B: patch" >> app/progress.txt && true')]
    with ThreadPoolExecutor() as pool:
        results = list(pool.map(lambda s: (s[0], s[0].exec(s[1])), strategies))
    for fork, result in results:
        print(f"{fork.id}: exit {result.exit_code}")

    winner = next((fork for fork, result in results if result.exit_code == 0), None)
    if winner is None:
        raise SystemExit("no strategy succeeded")
    kept = winner.checkpoint(kind="fs")
    session.restore(kept["id"])
    print(f"kept the winner: {session.files.read('app/progress.txt').decode().strip().splitlines()[-1]}")
    for fork, _ in results:
        fork.delete()
finally:
    session.delete()
