"""PASS/FAIL lines of the deployment scripts' tests (test_launch, test_memguard,
test_copy_to_peer): each check prints one line, a failure also its detail; finish() gives the
exit code and the summary line."""
FAILS = []


def check(cond, what, detail=""):
    print(("PASS " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)
        if detail:
            print(detail, flush=True)


def finish(name):
    """Exit code: 1 and the failed checks' names if any failed."""
    if FAILS:
        print(f"{len(FAILS)} check(s) failed: {FAILS}")
        return 1
    print(f"all {name} checks passed")
    return 0
