#!/usr/bin/python3
"""Drives the `lookalike serve` page in headless Chromium (Debian's chromium
and chromium-driver through python3-selenium; no browser is downloaded).

usage: serve_browser.py URL QUERY_FILE EXPECTED_PATH PROFILE_DIR ORIGINAL COPY PASTED
                        LARGE HALF PART

QUERY_FILE is an edited copy of EXPECTED_PATH; COPY is a byte-identical copy
of ORIGINAL (their duplicate group); PASTED is an indexed image whose
thumbnail is pasted as a query; HALF is LARGE at half the size (a group of
level copy whose keeper is LARGE); PART is a large crop of EXPECTED_PATH (a
match of level part). The script walks what a user does:

- search: reaches the file picker with the keyboard; uploads QUERY_FILE and
  expects EXPECTED_PATH first (thumbnail rendered, evidence shown, folder
  and name on the card, the copy-path action); sees the results split into
  matches, each with its level (the original a copy, the crop a part), and
  the nearest images that are not a match, and narrows them with the level
  filter; changes the count with Enter
  (the page stays, the search runs again with the new count); picks the
  same file again (searched again); pastes an image (searched);
- the match view: inlier lines drawn, at most 100 until "draw all";
- similar: an indexed image's results leave the image itself out;
- duplicates: groups with the keeper marked and its reason shown; "select
  all but the keepers" (also with the keyboard); the selection exported as
  a list and as a script and read back; a group marked "not duplicates",
  still marked after a reload, then unmarked; JSON and CSV exports;
- the collection, the favicon, and nothing loaded from another origin.

Prints "ok" and exits 0, or names the failed step and exits 1.
"""
import json
import os
import sys

from selenium import webdriver
from selenium.common.exceptions import TimeoutException, WebDriverException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

# Waits end hung runs only; each step finishes in well under a second on an
# idle machine and in seconds on a loaded one. (SERVE_BROWSER_DEADLINE
# shortens them when checking that a broken page fails.)
DEADLINE = float(os.environ.get("SERVE_BROWSER_DEADLINE", "600"))

# Downloads are caught in the page: each exported blob is read back
# (Blob.text) and the link's click, which would save it, is dropped.
CATCH_DOWNLOADS = (
    "window.__downloads = [];"
    "const create = URL.createObjectURL;"
    "URL.createObjectURL = (blob) => {"
    "  if (blob.type) blob.text().then(text => window.__downloads.push({type: blob.type, text}));"
    "  return create.call(URL, blob);"
    "};"
    "HTMLAnchorElement.prototype.click = function () {};")


def main():
    url, query, expected, profile, original, copy, pasted, large, half, part = sys.argv[1:11]
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--user-data-dir=" + profile, "--window-size=1280,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    step = "start"
    try:
        wait = WebDriverWait(driver, DEADLINE)
        js = driver.execute_script

        def searches():
            return int(driver.find_element(By.ID, "search-status").get_attribute(
                "data-searches") or 0)

        def cards(where="#results"):
            return driver.find_elements(By.CSS_SELECTOR, where + " .card")

        def ids_by_path():
            return js("return fetch('/api/images?limit=1000').then(r => r.json())"
                      ".then(j => Object.fromEntries(j.images.map(m => [m.path, m.id])));")

        def open_match(where):
            """Follows the first match link in `where`; the canvas once it shows that pair."""
            link = where.find_element(By.CSS_SELECTOR, "a.match-link")
            pair = link.get_attribute("href").split("#/match/")[1]
            link.click()
            return wait.until(lambda d: d.find_element(
                By.CSS_SELECTOR, '#match-canvas[data-lines][data-pair="%s"]' % pair))

        step = "load the page"
        driver.get(url)
        wait.until(lambda d: d.find_element(By.ID, "file"))
        js("window.__loaded = true;")

        step = "reach the file picker with the keyboard, before the results count"
        order = []
        for _ in range(20):
            ActionChains(driver).send_keys(Keys.TAB).perform()
            active = js("return document.activeElement.id || document.activeElement.tagName;")
            order.append(active)
            if active == "k":
                break
        if "file" not in order or order.index("file") > order.index("k"):
            raise AssertionError("tab order: %r" % order)

        step = "upload the query and see the original ranked first"
        driver.find_element(By.ID, "file").send_keys(query)
        first = wait.until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '#results .card[data-rank="1"]'))[0]
        got = first.get_attribute("data-path")
        if got != expected:
            raise AssertionError("ranked first: %r, expected %r" % (got, expected))

        step = "see the original among the matches at level copy, the rest split by level"
        if first.get_attribute("data-level") != "copy":
            raise AssertionError("the rotated copy's original is at level %r" %
                                 first.get_attribute("data-level"))
        if first.find_element(By.CSS_SELECTOR, ".level").text != "copy":
            raise AssertionError("its badge says %r" % first.find_element(By.CSS_SELECTOR, ".level").text)
        matches = cards("#matches")
        nearest = cards("#nearest")
        if first not in matches or not nearest:
            raise AssertionError("%d matches, %d nearest" % (len(matches), len(nearest)))
        if any(c.get_attribute("data-level") == "none" for c in matches) or any(
                c.get_attribute("data-level") != "none" for c in nearest):
            raise AssertionError("matches %r, nearest %r" % (
                [c.get_attribute("data-level") for c in matches],
                [c.get_attribute("data-level") for c in nearest]))
        if not driver.find_element(By.ID, "nearest-title").is_displayed():
            raise AssertionError("the 'nearest, not a match' section is not shown")
        crop = [c for c in matches if c.get_attribute("data-path") == part]
        if len(crop) != 1 or crop[0].get_attribute("data-level") != "part":
            raise AssertionError("the large crop is not a match at level part: %r" % [
                (c.get_attribute("data-path"), c.get_attribute("data-level")) for c in cards()])
        crop = crop[0]
        if crop.find_element(By.CSS_SELECTOR, ".level").text != "part":
            raise AssertionError("the crop's badge says %r" % crop.find_element(By.CSS_SELECTOR, ".level").text)

        step = "show parts and closer: the nearest non-matches are hidden, the crop shown"
        Select(driver.find_element(By.ID, "level-filter")).select_by_value("part")
        wait.until(lambda d: not d.find_element(By.ID, "nearest-title").is_displayed())
        if any(c.is_displayed() for c in nearest) or not first.is_displayed() or not crop.is_displayed():
            raise AssertionError("under the filter 'part': nearest %r, copy %r, crop %r" % (
                [c.is_displayed() for c in nearest], first.is_displayed(), crop.is_displayed()))

        step = "show only copies: the crop is hidden too"
        Select(driver.find_element(By.ID, "level-filter")).select_by_value("copy")
        wait.until(lambda d: not crop.is_displayed())
        if not first.is_displayed():
            raise AssertionError("the copy is hidden by the filter 'copies'")
        if any(c.is_displayed() for c in matches
               if c.get_attribute("data-level") not in ("copy", "identical")):
            raise AssertionError("a weaker match is shown under the filter 'copies'")

        step = "show only identical files: none here, and the page says so"
        Select(driver.find_element(By.ID, "level-filter")).select_by_value("identical")
        wait.until(lambda d: d.find_element(By.ID, "no-matches").is_displayed())
        if any(c.is_displayed() for c in cards()):
            raise AssertionError("a card is shown under the filter 'identical'")

        step = "show all results again"
        Select(driver.find_element(By.ID, "level-filter")).select_by_value("none")
        wait.until(lambda d: d.find_element(By.ID, "nearest-title").is_displayed())
        if driver.find_element(By.ID, "no-matches").is_displayed():
            raise AssertionError("'no match at this level' is still shown")
        if not all(c.is_displayed() for c in cards()):
            raise AssertionError("a card is still hidden under the filter 'all results'")

        step = "see what ranked the first hit, its thumbnail correlation included"
        meta = first.text
        if "inliers" not in meta or "thumbnail" not in meta:
            raise AssertionError("the first hit says: %r" % meta)

        step = "see the first hit's name and folder, and copy its path"
        name = first.find_element(By.CSS_SELECTOR, ".name").text
        folder = first.find_element(By.CSS_SELECTOR, ".folder").text
        if folder + "/" + name != expected:
            raise AssertionError("the card shows %r in %r" % (name, folder))
        js("window.__copied = [];"
           "Object.defineProperty(navigator, 'clipboard', {configurable: true, value: {"
           "  writeText: (t) => { window.__copied.push(t); return Promise.resolve(); }}});")
        first.find_element(By.CSS_SELECTOR, "button.copy-path").click()
        wait.until(lambda d: js("return window.__copied.length") == 1)
        if js("return window.__copied[0]") != expected:
            raise AssertionError("copied %r" % js("return window.__copied"))
        wait.until(lambda d: expected in d.find_element(By.ID, "notice").text)

        step = "copy a path where the clipboard API is refused (the fallback)"
        js("Object.defineProperty(navigator, 'clipboard', {configurable: true, value: {"
           "  writeText: () => Promise.reject(new Error('not allowed'))}});"
           "const exec = document.execCommand.bind(document);"
           "document.execCommand = (c) => {"
           "  if (c === 'copy') { window.__copied.push(document.activeElement.value); return true; }"
           "  return exec(c); };")
        first.find_element(By.CSS_SELECTOR, "button.copy-path").click()
        wait.until(lambda d: js("return window.__copied.length") == 2)
        if js("return window.__copied[1]") != expected:
            raise AssertionError("copied %r" % js("return window.__copied"))

        step = "see the first hit's thumbnail rendered"
        wait.until(lambda d: d.execute_script(
            "const i = document.querySelector('#results .card[data-rank=\"1\"] img');"
            "return i && i.complete && i.naturalWidth > 0;"))

        step = "change the count and press Enter: searched again, the page stays"
        done = searches()
        count = driver.find_element(By.ID, "k")
        count.send_keys(Keys.CONTROL, "a")
        count.send_keys("3")
        count.send_keys(Keys.ENTER)
        wait.until(lambda d: searches() > done and len(cards()) == 3)
        if not js("return window.__loaded === true"):
            raise AssertionError("the page was reloaded")
        if cards()[0].get_attribute("data-path") != expected:
            raise AssertionError("after the new count, first: %r" %
                                 cards()[0].get_attribute("data-path"))

        step = "change the count without Enter (leaving the field)"
        done = searches()
        count.send_keys(Keys.CONTROL, "a")
        count.send_keys("5")
        count.send_keys(Keys.TAB)
        wait.until(lambda d: searches() > done and len(cards()) == 5)

        step = "pick the same file again: searched again"
        done = searches()
        driver.find_element(By.ID, "file").send_keys(query)
        wait.until(lambda d: searches() > done and len(cards()) == 5)
        if cards()[0].get_attribute("data-path") != expected:
            raise AssertionError("after picking again, first: %r" %
                                 cards()[0].get_attribute("data-path"))

        step = "paste an image (Ctrl+V): searched"
        ids = ids_by_path()
        done = searches()
        js("return fetch('/api/images/' + arguments[0] + '/thumbnail?size=512')"
           ".then(r => r.blob()).then(b => {"
           "  const data = new DataTransfer();"
           "  data.items.add(new File([b], 'image.png', {type: 'image/jpeg'}));"
           "  document.body.dispatchEvent(new ClipboardEvent('paste',"
           "    {clipboardData: data, bubbles: true, cancelable: true}));"
           "});", ids[pasted])
        wait.until(lambda d: searches() > done)
        top = cards()[0].get_attribute("data-path")
        if top != pasted:
            raise AssertionError("pasted %r, ranked first %r" % (pasted, top))
        if driver.find_element(By.ID, "query-name").text != "pasted image":
            raise AssertionError("the query is called %r" %
                                 driver.find_element(By.ID, "query-name").text)

        step = "search by an indexed image: the image itself is left out"
        done = searches()
        js("location.hash = '#/similar/' + arguments[0];", ids[original])
        wait.until(lambda d: searches() > done)
        shown = [c.get_attribute("data-path") for c in cards()]
        if original in shown:
            raise AssertionError("the query itself is among its results: %r" % shown)
        if shown[0] != copy:
            raise AssertionError("its identical copy is not first: %r" % shown)
        if cards()[0].get_attribute("data-level") != "identical":
            raise AssertionError("its copy is at level %r" % cards()[0].get_attribute("data-level"))
        if "left out" not in driver.find_element(By.ID, "search-status").text:
            raise AssertionError("status: " + driver.find_element(By.ID, "search-status").text)

        step = "go back to the upload and open the match view: inlier lines drawn"
        driver.find_element(By.ID, "file").send_keys(query)
        first = wait.until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '#results .card[data-rank="1"]'))[0]
        canvas = open_match(first)
        lines = int(canvas.get_attribute("data-lines"))
        status = driver.find_element(By.ID, "match-status").text
        if lines < 8:
            raise AssertionError("%d lines drawn (%s)" % (lines, status))
        lit = js(
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

        step = "open the duplicates page: groups, the keeper marked with its reason"
        driver.find_element(By.ID, "nav-duplicates").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#groups .group .card.keeper .keep"))
        wait.until(lambda d: d.execute_script(
            "const imgs = [...document.querySelectorAll('#groups img')];"
            "return imgs.length >= 2 && imgs.every(i => i.complete && i.naturalWidth > 0);"))
        groups = driver.find_elements(By.CSS_SELECTOR, "#groups .group")
        for g in groups:
            keepers = g.find_elements(By.CSS_SELECTOR, ".card.keeper")
            if len(keepers) != 1 or not keepers[0].find_element(By.CSS_SELECTOR, ".keep").is_displayed():
                raise AssertionError("group %s: %d keepers shown" %
                                     (g.get_attribute("data-group"), len(keepers)))
            reason = keepers[0].find_element(By.CSS_SELECTOR, ".keep-reason").text
            if len(reason) < len("kept: ") + 3:
                raise AssertionError("the keeper's reason: %r" % reason)
        pair = [g for g in groups
                if {c.get_attribute("data-path") for c in g.find_elements(By.CSS_SELECTOR, ".card")}
                == {original, copy}]
        if len(pair) != 1:
            raise AssertionError("no group of %s and its copy" % original)
        pair = pair[0]
        group_id = pair.get_attribute("data-group")
        keeper_path = pair.find_element(By.CSS_SELECTOR, ".card.keeper").get_attribute("data-path")
        if pair.find_element(By.CSS_SELECTOR, ".card:not(.keeper)").get_attribute(
                "data-level") != "identical":
            raise AssertionError("the byte-identical copy is not at level identical")

        step = "see the half-size copy's group at level copy, the large original kept"
        scaled = [g for g in groups
                  if {c.get_attribute("data-path") for c in g.find_elements(By.CSS_SELECTOR, ".card")}
                  == {large, half}]
        if len(scaled) != 1:
            raise AssertionError("no group of %s and its half-size copy" % large)
        scaled = scaled[0]
        if scaled.get_attribute("data-level") != "copy":
            raise AssertionError("the group's level: %r" % scaled.get_attribute("data-level"))
        if scaled.find_element(By.CSS_SELECTOR, "h3 .level").text != "copy":
            raise AssertionError("the group's heading: %r" %
                                 scaled.find_element(By.CSS_SELECTOR, "h3").text)
        if scaled.find_element(By.CSS_SELECTOR, ".card.keeper").get_attribute("data-path") != large:
            raise AssertionError("the half-size copy is kept")
        why = scaled.find_element(By.CSS_SELECTOR, ".card:not(.keeper) .member-reason").text
        if not why:
            raise AssertionError("the copy does not say why it is not kept")

        step = "show only groups of identical files"
        Select(driver.find_element(By.ID, "dup-level-filter")).select_by_value("identical")
        wait.until(lambda d: not scaled.is_displayed())
        if not pair.is_displayed():
            raise AssertionError("the identical group is hidden")
        Select(driver.find_element(By.ID, "dup-level-filter")).select_by_value("none")
        wait.until(lambda d: scaled.is_displayed())

        step = "the match view of the identical pair draws at most 100 lines until asked"
        canvas = open_match(pair)
        drawn, total = int(canvas.get_attribute("data-lines")), int(canvas.get_attribute("data-total"))
        if total <= 100 or drawn != 100:
            raise AssertionError("%d of %d lines drawn (%s)" % (
                drawn, total, driver.find_element(By.ID, "match-status").text))
        toggle = driver.find_element(By.ID, "match-all-lines")
        toggle.send_keys(Keys.ENTER)
        wait.until(lambda d: int(canvas.get_attribute("data-lines")) == total)
        driver.back()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#groups .group .card.keeper"))
        pair = driver.find_element(By.CSS_SELECTOR, '#groups .group[data-group="%s"]' % group_id)

        step = "select all but the keepers, with the keyboard"
        driver.find_element(By.ID, "select-all-but-keepers").send_keys(Keys.ENTER)
        boxes = driver.find_elements(By.CSS_SELECTOR, "#groups input.select")
        chosen = sorted(b.find_element(By.XPATH, "ancestor::div[contains(@class,'card')]")
                        .get_attribute("data-path") for b in boxes if b.is_selected())
        keepers = sorted(c.get_attribute("data-path")
                         for c in driver.find_elements(By.CSS_SELECTOR, "#groups .card.keeper"))
        others = sorted(c.get_attribute("data-path") for c in driver.find_elements(
            By.CSS_SELECTOR, "#groups .card:not(.keeper)"))
        if chosen != others or set(chosen) & set(keepers):
            raise AssertionError("chosen %r, keepers %r" % (chosen, keepers))
        count = int(driver.find_element(By.ID, "selection-status").get_attribute("data-count"))
        if count != len(others):
            raise AssertionError("the page counts %d chosen of %d" % (count, len(others)))

        step = "toggle one choice with the space bar"
        box = pair.find_element(By.CSS_SELECTOR, ".card:not(.keeper) input.select")
        box.send_keys(Keys.SPACE)
        wait.until(lambda d: not box.is_selected())
        box.send_keys(Keys.SPACE)
        wait.until(lambda d: box.is_selected())

        step = "export the selection as a list and as a script"
        js(CATCH_DOWNLOADS)
        driver.find_element(By.ID, "export-list").click()
        wait.until(lambda d: js("return window.__downloads.length") == 1)
        driver.find_element(By.ID, "export-script").click()
        wait.until(lambda d: js("return window.__downloads.length") == 2)
        files = {f["type"]: f["text"] for f in js("return window.__downloads")}
        listed = sorted(files["text/plain"].splitlines())
        if listed != others:
            raise AssertionError("the list holds %r, expected %r" % (listed, others))
        script = files["text/x-shellscript"]
        if not script.startswith("#!/bin/sh\n"):
            raise AssertionError("the script starts: %r" % script[:40])
        removed = [l for l in script.splitlines() if l.startswith("#rm -- ")]
        commands = [l for l in script.splitlines() if l and not l.startswith("#")]
        if len(removed) != len(others) or commands != ["set -eu"]:
            raise AssertionError("the script: %r" % script)
        quoted = "#rm -- '" + copy.replace("'", "'\\''") + "'"
        if keeper_path == original and quoted not in removed:
            raise AssertionError("the script does not remove %r as %r: %r" % (copy, quoted, script))
        if "keep " + keeper_path not in script:
            raise AssertionError("the script does not name the keeper: %r" % script)

        step = "mark the group 'not duplicates' with the keyboard"
        pair.find_element(By.CSS_SELECTOR, "button.not-duplicates").send_keys(Keys.ENTER)
        marked = '#groups .group[data-group="%s"][data-not-duplicates="true"]' % group_id
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, marked))
        box = driver.find_element(By.CSS_SELECTOR, marked + " .card:not(.keeper) input.select")
        if box.is_selected() or box.is_enabled():
            raise AssertionError("a marked group's member can still be chosen")

        step = "see the mark remembered after a reload"
        driver.refresh()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#groups .group .card.keeper"))
        if not driver.find_elements(By.CSS_SELECTOR, marked):
            raise AssertionError("the mark is gone after a reload")

        step = "unmark the group, and see that remembered too"
        driver.find_element(By.CSS_SELECTOR, marked + " button.not-duplicates").click()
        unmarked = '#groups .group[data-group="%s"]:not([data-not-duplicates])' % group_id
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, unmarked))
        driver.refresh()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#groups .group .card.keeper"))
        if not driver.find_elements(By.CSS_SELECTOR, unmarked):
            raise AssertionError("the group is still marked after a reload")

        step = "export the groups as CSV and JSON"
        js(CATCH_DOWNLOADS)
        driver.find_element(By.ID, "export-csv").click()
        driver.find_element(By.ID, "export-json").click()
        wait.until(lambda d: js("return window.__downloads.length") == 2)
        files = {f["type"]: f["text"] for f in js("return window.__downloads")}
        groups = len(driver.find_elements(By.CSS_SELECTOR, "#groups .group"))
        rows = files["text/csv"].splitlines()
        if rows[0] != "group,keep,id,path,width,height,bytes,score,level,not_duplicates":
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

        step = "have a favicon"
        status = js("return fetch('/favicon.ico').then(r => r.status + ' ' + r.headers.get('Content-Type'));")
        if status != "200 image/svg+xml":
            raise AssertionError("/favicon.ico: " + status)

        step = "load nothing from elsewhere"
        origin = url.rstrip("/")
        names = js("return performance.getEntriesByType('resource').map(e => e.name);")
        foreign = [n for n in names if not (n.startswith(origin + "/") or n.startswith("blob:"))]
        if foreign:
            raise AssertionError("fetched from elsewhere: %r" % foreign)
        print("ok: %d inlier lines, %d resources" % (lines, len(names)))
        return 0
    except (AssertionError, WebDriverException) as e:
        print("failed to %s: %s" % (step, e or "timed out"))
        return 1
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
