"""Writes data/tiny_corpus.txt: a small synthetic English corpus (deterministic) for the language-model
ports (examples/word_language_model.rs, examples/nanogpt.rs). One sentence per line, as Wikitext's lines.

    python tools/ports/corpus.py
"""
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DET = ["the", "a", "every", "one", "that", "this"]
ADJ = ["small", "old", "quiet", "bright", "heavy", "green", "tired", "clever", "strange", "warm", "cold", "young"]
NOUN = ["cat", "dog", "river", "tree", "child", "farmer", "ship", "garden", "stone", "bird", "teacher", "city",
        "window", "road", "horse", "letter", "king", "mountain", "lamp", "boat"]
VERB_T = ["sees", "finds", "follows", "carries", "watches", "paints", "remembers", "builds", "opens", "holds"]
VERB_I = ["sleeps", "waits", "sings", "falls", "runs", "shines", "listens", "rests", "returns", "dreams"]
PREP = ["near", "under", "behind", "beside", "across", "over", "inside", "past"]
ADV = ["slowly", "again", "today", "at night", "in spring", "quietly", "every morning", "without a sound"]
CONJ = ["and", "but", "while", "because", "so"]


def noun_phrase(r):
    np = [r.choice(DET)]
    if r.random() < 0.5:
        np.append(r.choice(ADJ))
    np.append(r.choice(NOUN))
    if r.random() < 0.2:
        np += [r.choice(PREP), r.choice(DET), r.choice(NOUN)]
    return np


def clause(r):
    words = noun_phrase(r)
    if r.random() < 0.55:
        words += [r.choice(VERB_T)] + noun_phrase(r)
    else:
        words.append(r.choice(VERB_I))
    if r.random() < 0.35:
        words += r.choice(ADV).split()
    return words


def sentence(r):
    words = clause(r)
    if r.random() < 0.3:
        words += [r.choice(CONJ)] + clause(r)
    return " ".join(words) + " ."


def main():
    r = random.Random(1234)
    lines = [sentence(r) for _ in range(900)]
    path = os.path.join(ROOT, "data", "tiny_corpus.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} lines, {sum(len(l) + 1 for l in lines)} bytes to data/tiny_corpus.txt")


if __name__ == "__main__":
    main()
