"""Drive the Dagster UI as a person would: launch the example enrichment from the UI, let the
sensor carry it to ``merged``, edit the sample CSV and watch it go stale, materialize again, and
screenshot each page on the way.

    pip install playwright   # the browser is Debian's chromium: apt-get install chromium
    python scripts/ui_walk.py /tmp/shots

Starts the emulator and ``dagster dev`` on free ports with a throwaway DAGSTER_HOME and storage
root, clicks Materialize on ``grocery_catalog`` and then on ``product_attributes/input_shards``,
waits for the merged output and the automation sensor, and saves the runs, merged (and its
checks: the emulator refuses a fifth of the requests, so ``failed_rows`` fails), submissions,
automation and category_report pages. Then it appends a row to the sample CSV (restored at the
end), waits for the automation sensor's observation to show ``input_shards`` stale, materializes
it again and saves the pages after the second merge.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CATALOG = REPO / "maple_assets" / "data" / "grocery_catalog.csv"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def click_materialize(page: Any, path: str, base: str) -> None:
    page.goto(base + path)
    page.wait_for_timeout(4000)
    page.get_by_role("button", name="Materialize").first.click()
    page.wait_for_timeout(3000)
    for label in ("Confirm", "Launch run", "Materialize"):  # a dialog may ask to confirm
        button = page.get_by_role("dialog").get_by_role("button", name=label)
        if button.count():
            button.first.click()
            return


def walk(out: Path, work: Path, base: str) -> None:
    from playwright.sync_api import sync_playwright  # optional: pip install playwright

    merged = work / "store" / "product_attributes" / "state" / "merged.json"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page(viewport={"width": 1500, "height": 950})
        page.goto(base + "/asset-groups")
        page.wait_for_timeout(4000)
        skip = page.get_by_role("button", name="Skip")  # Dagster's first-visit newsletter modal
        if skip.count():
            skip.first.click()
        page.screenshot(path=str(out / "01_lineage.png"))
        click_materialize(page, "/assets/grocery_catalog", base)
        page.wait_for_timeout(15000)
        click_materialize(page, "/assets/product_attributes/input_shards", base)
        page.screenshot(path=str(out / "02_input_shards.png"))
        deadline = time.time() + 300
        while time.time() < deadline and not merged.exists():
            time.sleep(3)
        print("merged:", merged.read_text() if merged.exists() else "NOT within 300 s")
        page.wait_for_timeout(60000)  # the automation sensor's tick refreshes category_report
        pages = (
            ("07_category_report", "/assets/category_report"),
            ("08_merged_checks", "/assets/product_attributes/merged?view=checks"),
            ("03_runs", "/runs"),
            ("04_merged", "/assets/product_attributes/merged"),
            ("05_submissions", "/assets/product_attributes/submissions"),
            ("06_automation", "/overview/automation"),
        )
        shoot(page, base, out, pages)
        first = merged.read_text()
        with CATALOG.open("a") as handle:  # an edit: one more item
            handle.write("SKU-19999,Maple Farm Rye loaf 500 g,A dense rye loaf.,Bakery,3.10\n")
        page.wait_for_timeout(150000)  # observed within a minute or two; catalog re-read (eager)
        shoot(page, base, out, (("10_lineage_after_edit", "/asset-groups"),))
        shoot(
            page, base, out, (("11_input_shards_stale", "/assets/product_attributes/input_shards"),)
        )
        click_materialize(page, "/assets/product_attributes/input_shards", base)
        deadline = time.time() + 300
        while time.time() < deadline and merged.read_text() == first:
            time.sleep(3)
        page.wait_for_timeout(60000)
        shoot(page, base, out, tuple((f"1{n[1:]}_again", p) for n, p in pages))
        browser.close()


def shoot(page: Any, base: str, out: Path, pages: tuple[tuple[str, str], ...]) -> None:
    for name, path in pages:
        page.goto(base + path)
        page.wait_for_timeout(5000)
        page.screenshot(path=str(out / f"{name}.png"))


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "ui-shots")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp())
    (work / "home").mkdir()
    (work / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    emulator_port, ui_port = free_port(), free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(work / "home"),
        "MAPLE_STORAGE": str(work / "store"),
        "MAPLE_EMULATOR_URL": f"http://127.0.0.1:{emulator_port}",
    }
    env.pop("OPENAI_API_KEY", None)
    original = CATALOG.read_bytes()
    with open(work / "emulator.log", "w") as elog, open(work / "dev.log", "w") as dlog:
        emulator = subprocess.Popen(
            [
                BIN / "maple",
                "emulator",
                "--port",
                str(emulator_port),
                "--batch-seconds",
                "3",
                "--fail",
                "refused=0.2",
            ],
            env=env,
            stdout=elog,
            stderr=subprocess.STDOUT,
        )
        dev = subprocess.Popen(
            [BIN / "dagster", "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", f"{ui_port}"],
            cwd=REPO,
            env=env,
            stdout=dlog,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{ui_port}"
        try:
            for _ in range(240):
                try:
                    urllib.request.urlopen(base + "/server_info", timeout=2)
                    break
                except OSError:
                    time.sleep(0.5)
            walk(out, work, base)
        finally:
            CATALOG.write_bytes(original)
            os.killpg(dev.pid, 15)
            emulator.terminate()
            dev.wait(30)
            print("screenshots in", out, "- logs in", work)


if __name__ == "__main__":
    main()
