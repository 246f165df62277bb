"""Issue 39, item 15: the diff between artifact versions was line-level only — a changed
figure in a long paragraph showed the whole paragraph removed and added. Now a changed
line is paired with the line that replaced it and the words that differ are marked with
``<del>``/``<ins>`` (not colour alone), server-side, every piece escaped."""

from __future__ import annotations

from artifacts.rendering import DiffLine, with_words


def test_a_changed_word_is_marked_within_its_line():
    """Issue 39 item 15: only ``1,200`` → ``1,350`` is marked; the rest of the line is plain."""
    lines = with_words(
        [
            DiffLine("hunk", "@@ -1 +1 @@"),
            DiffLine("del", "-Revenue was 1,200 in June."),
            DiffLine("add", "+Revenue was 1,350 in June."),
        ]
    )
    removed, added = str(lines[1].html), str(lines[2].html)
    assert removed == '-Revenue was 1,<del class="diff-word">200</del> in June.'
    assert added == '+Revenue was 1,<ins class="diff-word">350</ins> in June.'
    assert str(lines[0].html) == "@@ -1 +1 @@"


def test_every_piece_is_escaped():
    """Issue 39 item 15: markup in the artifact stays text, inside and outside the marks."""
    lines = with_words([DiffLine("del", "-<b>old</b> & <script>"), DiffLine("add", "+<b>new</b> & <script>")])
    removed, added = str(lines[0].html), str(lines[1].html)
    assert "<script>" not in removed + added and "<b>" not in removed + added
    assert '&lt;b&gt;<del class="diff-word">old</del>&lt;/b&gt; &amp; &lt;script&gt;' in removed
    assert '<ins class="diff-word">new</ins>' in added


def test_lines_without_a_counterpart_stay_whole():
    """Issue 39 item 15: two lines removed, one added: the first pair is marked, the second removed line whole."""
    lines = with_words(
        [DiffLine("del", "-a b"), DiffLine("del", "-c d"), DiffLine("add", "+a x"), DiffLine("ctx", " e")]
    )
    assert [line.kind for line in lines] == ["del", "del", "add", "ctx"]
    assert "<del" in str(lines[0].html) and str(lines[1].html) == "-c d" and "<ins" in str(lines[2].html)
    assert str(lines[3].html) == " e"
