"""--serve's page in a real browser: Debian's chromium, headless, driven by selenium.

One browser for the module (starting one takes seconds), on one server over a copy of
demo-data with a hostile note added. Skipped, saying why, where chromium, its driver or
selenium is absent; .ci/run installs all three. With DEMO_RAG_SCREENSHOT=bench/serve.png the
test of a sentence's line saves what the page shows then (the README's screenshot):

    DEMO_RAG_SCREENSHOT=bench/serve.png python -m pytest -p no:xdist tests/test_serve_browser.py
"""
from __future__ import annotations

import itertools
import os
import shutil
import threading
import time

import pytest
from conftest import ROOT
from ollama_server import FakeOllama
from test_serve import Page

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
try:
    from selenium import webdriver
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    webdriver = None
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER and webdriver),
    reason="the page's browser tests need chromium and chromedriver (apt-get install chromium "
           "chromium-driver) and selenium (pip install selenium)")

# Its first line is what the stand-in's answer quotes: the answer carries it too.
HOSTILE = ("# Gremlin cage <script>window.pwned = 1</script> <img src=x onerror=\"window.pwned"
           " = 2\">\n\nThe gremlin cage <img src=\"{pwned}\"> [open](javascript:window.pwned=3) "
           "\x1b]52;c;cHduZWQ=\x07 is locked at night.\n")


@pytest.fixture(scope="module")
def fake():
    with FakeOllama() as f:
        yield f


@pytest.fixture(scope="module")
def page(fake, tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve-browser")
    shutil.copytree(ROOT / "demo-data", folder / "notes")
    (folder / "notes" / "gremlin.md").write_text(HOSTILE.format(pwned=f"{fake.url}/pwned"))
    p = Page(folder / "notes", folder / "cache", fake.url)
    p.folder = folder
    yield p
    p.stop()


@pytest.fixture(scope="module")
def browser(page):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1200,900", "--host-resolver-rules=MAP evil.test 127.0.0.1"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    driver.set_script_timeout(30)
    driver.get(page.url)
    yield driver
    driver.quit()


@pytest.fixture
def fresh(browser, page):
    """The page as a new tab would have it: no question asked, no conversation."""
    browser.get(f"http://127.0.0.1:{page.port}/")
    WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "q"))
    return browser


def ask(driver, question: str) -> None:
    box = driver.find_element(By.ID, "q")
    box.clear()
    box.send_keys(question, Keys.ENTER)


def last_turn(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#log section")[-1]


def wait_status(driver, test, timeout: float = 20) -> str:
    """The last question's status line, once `test` holds for it."""
    WebDriverWait(driver, timeout).until(
        lambda d: test(last_turn(d).find_elements(By.TAG_NAME, "p")[0].text))
    return last_turn(driver).find_elements(By.TAG_NAME, "p")[0].text


def slow_answer(fake, words: int | None, ended: threading.Event) -> None:
    """The stand-in's next answer: a word every 50 ms, `words` of them (None: until `ended`)."""
    def pieces():
        for n in itertools.count() if words is None else range(words):
            if ended.wait(0.05):
                return
            yield f"word{n} "
    fake.answer = pieces()


def test_a_question_s_answer_streams_onto_the_page(fresh, fake):
    ended = threading.Event()
    slow_answer(fake, 30, ended)
    try:
        ask(fresh, "What is BM25?")
        seen = set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "word29" not in "".join(seen):
            answer = last_turn(fresh).find_elements(By.TAG_NAME, "p")[1].text
            seen.add(answer)
            time.sleep(0.02)
        assert len({s for s in seen if s.startswith("word0")}) > 2       # more than one update
    finally:
        ended.set()
        fake.answer = None


def test_a_click_on_a_sentence_opens_its_note_at_the_supporting_line_in_view(fresh, page, fake):
    fake.answer = "Use 15 g of coffee for 240 g of water [1]. Grind it medium-fine [1]."
    try:
        ask(fresh, "How many grams of coffee for 240 g of water?")
        wait_status(fresh, lambda text: "sentence" in text)
    finally:
        fake.answer = None
    sentence = last_turn(fresh).find_element(By.CSS_SELECTOR, "p > span[data-path]")
    path, line = sentence.get_attribute("data-path"), int(sentence.get_attribute("data-line"))
    sentence.click()
    hit = WebDriverWait(fresh, 10).until(lambda d: d.find_element(By.CSS_SELECTOR, "#note .hit"))
    lines = (page.folder / "notes" / path).read_text().splitlines()
    assert hit.text == lines[line - 1] == "Start with a 1:16 ratio: 15 g of coffee to 240 g of " \
        "water. Grind medium-fine, like table salt. If the cup tastes sour, grind finer; if it " \
        "tastes bitter and dry, grind coarser."
    assert fresh.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return r.top >= 0 && "
        "r.bottom <= innerHeight;", hit)
    assert fresh.find_element(By.ID, "title").text == path
    if os.environ.get("DEMO_RAG_SCREENSHOT"):
        fresh.save_screenshot(os.environ["DEMO_RAG_SCREENSHOT"])
    # ...and with the keyboard alone: a source, reached by Tab, opened by Enter
    source = last_turn(fresh).find_element(By.CSS_SELECTOR, "ol li")
    fresh.execute_script("document.getElementById('title').textContent = ''")
    fresh.execute_script("arguments[0].focus()", source)
    source.send_keys(Keys.ENTER)
    WebDriverWait(fresh, 10).until(lambda d: d.find_element(By.ID, "title").text)


def test_stop_stops_the_answer_on_the_server(fresh, fake):
    ended = threading.Event()
    slow_answer(fake, None, ended)
    try:
        ask(fresh, "What is BM25?")
        answer = lambda: last_turn(fresh).find_elements(By.TAG_NAME, "p")[1].text  # noqa: E731
        WebDriverWait(fresh, 20).until(lambda d: "word2" in answer())
        chat = fake.records("/api/chat")[-1]
        fresh.find_element(By.ID, "stop").click()
        assert wait_status(fresh, lambda text: text == "stopped") == "stopped"
        fake.wait_for(lambda: chat.get("gone"), timeout=10)   # its stream closed: Ollama stops
        assert not fresh.find_element(By.ID, "stop").is_enabled()
    finally:
        ended.set()
        fake.answer = None


def test_a_follow_up_is_asked_in_the_tab_s_conversation(fresh):
    ask(fresh, "What is BM25?")
    wait_status(fresh, lambda text: "sentence" in text)
    ask(fresh, "and who made it?")
    wait_status(fresh, lambda text: "sentence" in text)
    said = last_turn(fresh).find_element(By.TAG_NAME, "h3").text
    assert said == "and who made it? (searching for: What is BM25? and who made it?)"


def test_a_hostile_note_shows_as_text_and_runs_nothing(fresh, fake):
    ask(fresh, "Where is the gremlin cage locked?")
    wait_status(fresh, lambda text: "sentence" in text or "Not found" in text)
    last_turn(fresh).find_element(By.CSS_SELECTOR, "ol li[data-path='gremlin.md']").click()
    WebDriverWait(fresh, 10).until(lambda d: "<script>" in d.find_element(By.ID, "note").text)
    assert "window.pwned = 1" in last_turn(fresh).text        # the answer quoted it, as text
    time.sleep(0.5)
    assert fresh.execute_script("return window.pwned") is None
    with pytest.raises(NoAlertPresentException):
        fresh.switch_to.alert.text
    assert not fresh.find_elements(By.CSS_SELECTOR, "#note img, #note script, #log img, #log a[href]")
    assert not [r for r in fake.requests if "pwned" in r["path"]]     # no request anywhere


def test_a_wrong_token_or_a_forged_host_gets_403_in_the_browser(browser, page):
    browser.get(f"http://127.0.0.1:{page.port}/?token=wrong")
    assert "token" in browser.find_element(By.TAG_NAME, "body").text
    assert not browser.find_elements(By.ID, "q")
    browser.get(f"http://evil.test:{page.port}/?token={page.token}")     # DNS rebinding's way
    assert "Host" in browser.find_element(By.TAG_NAME, "body").text
    assert not browser.find_elements(By.ID, "q")


def test_the_page_fits_a_phone_s_width(fresh):
    fresh.set_window_size(390, 800)
    try:
        fresh.refresh()
        ask(fresh, "What is BM25?")
        wait_status(fresh, lambda text: "sentence" in text)
        assert fresh.execute_script("return document.documentElement.scrollWidth <= innerWidth")
    finally:
        fresh.set_window_size(1200, 900)
