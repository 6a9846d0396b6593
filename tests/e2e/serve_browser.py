#!/usr/bin/python3
"""Drives the `lookalike serve` page in headless Chromium (Debian's chromium
and chromium-driver through python3-selenium; no browser is downloaded).

usage: serve_browser.py URL QUERY_FILE EXPECTED_PATH PROFILE_DIR

Uploads QUERY_FILE, expects EXPECTED_PATH ranked first with its thumbnail
rendered, opens the match view and checks that inlier lines were drawn
(pixels in the strip between the two pictures, which only lines cross),
opens the duplicates page (groups with a keeper and rendered thumbnails,
exported as CSV and JSON) and the collection, and checks the page loaded nothing from another origin.
Prints "ok" and exits 0, or names the failed step and exits 1.
"""
import json
import sys

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

# Waits end hung runs only; each step finishes in well under a second on an
# idle machine.
DEADLINE = 180


def main():
    url, query, expected, profile = sys.argv[1:5]
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--user-data-dir=" + profile, "--window-size=1280,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    step = "start"
    try:
        wait = WebDriverWait(driver, DEADLINE)

        step = "load the page"
        driver.get(url)
        wait.until(lambda d: d.find_element(By.ID, "file"))

        step = "upload the query and see the original ranked first"
        driver.find_element(By.ID, "file").send_keys(query)
        first = wait.until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '#results .card[data-rank="1"]'))[0]
        got = first.get_attribute("data-path")
        if got != expected:
            raise AssertionError("ranked first: %r, expected %r" % (got, expected))

        step = "see what ranked the first hit, its thumbnail correlation included"
        meta = first.text
        if "inliers" not in meta or "thumbnail" not in meta:
            raise AssertionError("the first hit says: %r" % meta)

        step = "see the first hit's thumbnail rendered"
        wait.until(lambda d: d.execute_script(
            "const i = document.querySelector('#results .card[data-rank=\"1\"] img');"
            "return i && i.complete && i.naturalWidth > 0;"))

        step = "open the match view and see inlier lines drawn"
        first.find_element(By.CSS_SELECTOR, "a.match-link").click()
        canvas = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#match-canvas[data-lines]"))
        lines = int(canvas.get_attribute("data-lines"))
        status = driver.find_element(By.ID, "match-status").text
        if lines < 8:
            raise AssertionError("%d lines drawn (%s)" % (lines, status))
        lit = driver.execute_script(
            "const c = document.getElementById('match-canvas');"
            "const x = +c.dataset.gapX, w = +c.dataset.gapWidth;"
            "const d = c.getContext('2d').getImageData(x, 0, w, c.height).data;"
            "let n = 0; for (let i = 0; i < d.length; i += 4)"
            "  if (Math.max(d[i], d[i + 1], d[i + 2]) > 80) ++n;"
            "return n;")
        if lit < lines:
            raise AssertionError("only %d lit pixels between the pictures for %d lines" %
                                 (lit, lines))
        if "inliers" not in status:
            raise AssertionError("match status says: " + status)

        step = "open the duplicates page"
        driver.find_element(By.ID, "nav-duplicates").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#groups .group .keep"))
        wait.until(lambda d: d.execute_script(
            "const imgs = [...document.querySelectorAll('#groups img')];"
            "return imgs.length >= 2 && imgs.every(i => i.complete && i.naturalWidth > 0);"))

        step = "export the groups as CSV and JSON"
        # Downloads are caught in the page: each exported blob is read back
        # (Blob.text) and the link's click, which would save it, is dropped.
        driver.execute_script(
            "window.__downloads = [];"
            "const create = URL.createObjectURL;"
            "URL.createObjectURL = (blob) => {"
            "  blob.text().then(text => window.__downloads.push({type: blob.type, text}));"
            "  return create.call(URL, blob);"
            "};"
            "HTMLAnchorElement.prototype.click = function () {};")
        driver.find_element(By.ID, "export-csv").click()
        driver.find_element(By.ID, "export-json").click()
        wait.until(lambda d: d.execute_script("return window.__downloads.length") == 2)
        files = {f["type"]: f["text"] for f in driver.execute_script("return window.__downloads")}
        groups = len(driver.find_elements(By.CSS_SELECTOR, "#groups .group"))
        rows = files["text/csv"].splitlines()
        if rows[0] != "group,keep,id,path,width,height,bytes,score":
            raise AssertionError("CSV header: " + rows[0])
        keepers = [r for r in rows[1:] if r.split(",")[1] == "1"]
        exported = json.loads(files["application/json"])
        if len(keepers) != groups or len(exported) != groups or len(rows) < 1 + 2 * groups:
            raise AssertionError("%d groups shown, CSV %d rows with %d keepers, JSON %d groups" %
                                 (groups, len(rows) - 1, len(keepers), len(exported)))

        step = "open the collection"
        driver.find_element(By.ID, "nav-collection").click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#images .card")) > 0)
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#info tr")) > 0)

        step = "load nothing from elsewhere"
        origin = url.rstrip("/")
        names = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name);")
        foreign = [n for n in names if not (n.startswith(origin + "/") or n.startswith("blob:"))]
        if foreign:
            raise AssertionError("fetched from elsewhere: %r" % foreign)
        print("ok: %d inlier lines, %d resources" % (lines, len(names)))
        return 0
    except (AssertionError, TimeoutException) as e:
        print("failed to %s: %s" % (step, e or "timed out"))
        return 1
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
