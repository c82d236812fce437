"""File-heavy work, timed from inside: run the same in a sandbox and on the host (bench/small-files.mjs).

python3 small-files.py WORKDIR [--files N] [--git-files N] [--npm-package SPEC] [--scratch DIR] [--steps a,b]
Prints one JSON object: milliseconds per step ("npm" only where npm is installed; "files (in /tmp)"
only with --scratch, a directory on another mount: /tmp in a sandbox). --steps: only these
(syscalls, files, scratch, git, npm).
"""
import argparse
import json
import os
import shutil
import subprocess
import time


def timed(step):
    started = time.perf_counter()
    step()
    return round((time.perf_counter() - started) * 1000, 1)


def write_files(root, count, per_dir=1000):
    for d in range(0, count, per_dir):
        folder = os.path.join(root, str(d // per_dir))
        os.makedirs(folder)
        for i in range(min(per_dir, count - d)):
            with open(os.path.join(folder, str(i)), "w") as f:
                f.write("x" * 100)


def run(*cmd, cwd):
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workdir")
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--git-files", type=int, default=20_000)
    parser.add_argument("--npm-package", default="express@4.21.2")
    parser.add_argument("--scratch")
    parser.add_argument("--steps", default="syscalls,files,scratch,git,npm")
    args = parser.parse_args()
    steps = set(args.steps.split(","))
    work = args.workdir
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    result = {}

    if "syscalls" in steps:
        # What one system call costs: the floor of every file operation (gVisor intercepts each).
        result["100,000 system calls"] = timed(lambda: [os.getppid() for _ in range(100_000)])
        # ...and what starting a process costs (what a build or a shell script pays per command).
        result["100 processes"] = timed(lambda: [subprocess.run(["true"], check=True) for _ in range(100)])

    if "files" in steps:
        result["files"] = timed(lambda: write_files(os.path.join(work, "files"), args.files))
        result["files removed"] = timed(lambda: shutil.rmtree(os.path.join(work, "files")))

    if "scratch" in steps and args.scratch:
        scratch = os.path.join(args.scratch, "small-files")
        shutil.rmtree(scratch, ignore_errors=True)
        result["files (in /tmp)"] = timed(lambda: write_files(scratch, args.files))
        shutil.rmtree(scratch)

    if "git" in steps:
        git_checkouts(work, args.git_files, result)

    if "npm" in steps:
        npm_ci(work, args.npm_package, result)

    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


def git_checkouts(work, files, result):
    """A tree committed on `main` beside an empty branch: checking `main` out writes every file,
    first from loose objects (each read through its own mmap), then from a pack, as a clone has it."""
    repo = os.path.join(work, "repo")
    write_files(repo, files)
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "init.defaultBranch=main"]
    run(*git, "init", "-q", cwd=repo)
    run(*git, "add", "-A", cwd=repo)
    run(*git, "commit", "-q", "-m", "tree", cwd=repo)
    run(*git, "checkout", "-q", "--orphan", "empty", cwd=repo)
    run(*git, "rm", "-rfq", ".", cwd=repo)
    run(*git, "commit", "-q", "--allow-empty", "-m", "empty", cwd=repo)
    result["git checkout"] = timed(lambda: run(*git, "checkout", "-q", "main", cwd=repo))
    run(*git, "checkout", "-q", "empty", cwd=repo)
    run(*git, "gc", "-q", cwd=repo)
    result["git checkout (packed)"] = timed(lambda: run(*git, "checkout", "-q", "main", cwd=repo))


def npm_ci(work, package, result):
    # npm ci from a warm cache (--prefer-offline: what the cache holds is not asked for again): the install's file work.
    if shutil.which("npm"):
        app = os.path.join(work, "app")
        os.makedirs(app)
        cache = os.path.join(work, "npm-cache")
        npm = ["npm", "--cache", cache, "--no-audit", "--no-fund", "--loglevel=error"]
        run(*npm, "init", "-y", cwd=app)
        run(*npm, "install", package, cwd=app)
        shutil.rmtree(os.path.join(app, "node_modules"))
        result["npm ci (warm cache)"] = timed(lambda: run(*npm, "ci", "--prefer-offline", cwd=app))
        result["npm files"] = sum(len(files) for _, _, files in os.walk(os.path.join(app, "node_modules")))


main()
