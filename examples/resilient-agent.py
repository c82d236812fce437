"""An agent-style loop that keeps working while its sandbox is killed under it: each step appends
to a file in the session; every few steps the sandbox is killed (as an OOM or a lost node would),
and the next call resumes the session with its files. Nothing the agent wrote is lost.
Run against a running platform: SPACE_API_URL=... SPACE_API_KEY=... python3 examples/resilient-agent.py
"""

import os

from space import Space

space = Space()
session = space.sessions.create(template=os.environ.get("SPACE_EXAMPLE_TEMPLATE", "base"))
print(f"session {session.id}")
try:
    steps = int(os.environ.get("SPACE_EXAMPLE_STEPS", "6"))
    for step in range(1, steps + 1):
        lines = session.exec(f'echo "step {step}" >> journal.txt && wc -l < journal.txt').stdout.strip()
        print(f"step {step}: journal has {lines} lines")
        if step % 3 == 0:
            session.kill_sandbox()
            print("  (sandbox killed; the next call resumes the session)")
    journal = session.files.read("journal.txt").decode().strip().splitlines()
    if len(journal) != steps:
        raise SystemExit(f"expected {steps} journal lines, found {len(journal)}")
    history = session.refresh().data.get("sandboxHistory", [])
    print(f"done: {len(journal)} steps across {len(history)} sandboxes")
finally:
    session.delete()
