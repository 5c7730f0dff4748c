"""The documentation stays true: figures come only from the benchmark records, every relative link
resolves, and the README stays short."""

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "hls").glob("*/README.md"))]


def _render():
    spec = importlib.util.spec_from_file_location("docs_render", ROOT / "docs" / "render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rendered_docs_match_the_records():
    assert _render().main(["--check"]) == 0, "run python docs/render.py after changing docs/figures"


def test_every_record_is_rendered():
    render = _render()
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    hardware = (ROOT / "docs" / "hardware.md").read_text()  # the implementation records' table
    for key, record in render.load_records().items():
        assert record["command"] in (hardware if record["benchmark"] == "implement" else page), key


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc):
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://|#|mailto:", target):
            continue
        path = (doc.parent / target.split("#")[0]).resolve()
        assert path.exists(), f"{doc.relative_to(ROOT)} links to {target}, which does not exist"


def test_readme_is_short_and_links_each_kernel():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for kernel in sorted(p.parent.name for p in (ROOT / "hls").glob("*/SPEC.md")):
        assert f"hls/{kernel}/README.md" in text, f"README does not link the {kernel} kernel's README"


def test_kernel_readmes_name_their_four_implementations_and_tests():
    for spec in sorted((ROOT / "hls").glob("*/SPEC.md")):
        text = (spec.parent / "README.md").read_text()
        for what in ("numpy reference", "HLS C++", "reference RTL", "board driver", "tests"):
            assert what in text, f"{spec.parent.name}/README.md does not say where its {what} is"


def test_bad_records_are_named(tmp_path):
    render = _render()
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(render.RecordError, match="broken.json.*not valid JSON"):
        render.load_records(tmp_path)
    (tmp_path / "broken.json").write_text(json.dumps({"benchmark": "train"}))
    with pytest.raises(render.RecordError, match="missing schema"):
        render.load_records(tmp_path)
