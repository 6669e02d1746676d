"""Deterministic generator for ``sample_chats.jsonl.gz``.

Builds a few hundred realistic, varied conversations in OpenAI message format
(one ``{"messages": [...]}`` object per line) from hand-written topic templates:
cooking, coding help (with fenced code blocks), travel, math tutoring (with
Unicode math), customer support with tool calls (``get_weather``,
``search_flights``, ``lookup_order``, ``track_package``, ``convert_currency``)
and translation (French, German, Spanish, Japanese, Chinese, emoji).

Tool calls follow the OpenAI / Hugging Face convention that Qwen2.5's chat
template renders::

    {"role": "assistant", "content": "",
     "tool_calls": [{"type": "function",
                     "function": {"name": "get_weather",
                                  "arguments": {"city": "Lyon", "unit": "celsius"}}}]}
    {"role": "tool", "content": "{\\"city\\": \\"Lyon\\", \\"temperature\\": 18, ...}"}

(``arguments`` is a dict, the tool's output is a JSON *string*.)

Run from the repository root to regenerate the packaged file; the output is
byte-for-byte reproducible (fixed seed, gzip header without mtime)::

    python tools/make_sample_chats.py            # writes chatdata/data/sample_chats.jsonl.gz
    python tools/make_sample_chats.py --check    # exit 1 if the packaged file differs

It lives outside the package: chatdata ships only its output.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import random
import sys
from pathlib import Path

SEED = 20240917
N_CONVERSATIONS = 300
OUT = Path(__file__).resolve().parent.parent / "chatdata" / "data" / "sample_chats.jsonl.gz"

# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def sys_msg(text):
    return {"role": "system", "content": text}


def user(text):
    return {"role": "user", "content": text}


def asst(text):
    return {"role": "assistant", "content": text}


def call(name, content="", **arguments):
    """An assistant message carrying one tool call (arguments as a dict)."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def calls(content, *pairs):
    """An assistant message with several parallel tool calls: pairs of (name, arguments)."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"type": "function", "function": {"name": n, "arguments": a}} for n, a in pairs
        ],
    }


def tool(payload):
    return {"role": "tool", "content": json.dumps(payload, ensure_ascii=False)}


GENERIC_SYSTEMS = [
    "You are a helpful assistant.",
    "You are a friendly, concise assistant. Answer clearly and ask for clarification when a request is ambiguous.",
    "You are a knowledgeable assistant. Keep answers short unless the user asks for detail.",
]

THANKS = [
    ("Thanks, that's really helpful!", "You're welcome! Let me know if anything else comes up."),
    ("Perfect, thank you.", "Glad I could help. Have a great day!"),
    ("Great, thanks a lot 🙏", "Anytime! 😊"),
    ("Merci beaucoup !", "Avec plaisir ! N'hésitez pas si vous avez d'autres questions."),
    ("Danke schön!", "Gern geschehen! Viel Erfolg."),
    ("ありがとうございます！", "どういたしまして！また何かあればお気軽にどうぞ。"),
    ("谢谢！", "不客气！如果还有其他问题，随时问我。"),
    ("ok cool, thx", "No problem 👍"),
]


def maybe_system(rng, specific, p=0.6):
    """Return [system] with probability p (topic-specific prompt preferred)."""
    if rng.random() < p:
        return [sys_msg(rng.choice(specific + GENERIC_SYSTEMS[:1]))]
    return []


# --------------------------------------------------------------------------------------
# cooking
# --------------------------------------------------------------------------------------

RECIPES = [
    {
        "name": "a weeknight tomato pasta",
        "ask": "I have spaghetti, a can of tomatoes, garlic and some basil. What can I make in 20 minutes?",
        "answer": (
            "A quick garlic-tomato spaghetti is perfect here:\n\n"
            "1. Bring a large pot of salted water to a boil and cook 200 g spaghetti until al dente.\n"
            "2. Meanwhile, warm 3 tbsp olive oil in a pan and gently fry 3 sliced garlic cloves until just golden.\n"
            "3. Add the canned tomatoes, crush them with a spoon, season with salt and a pinch of chili flakes, and simmer 10 minutes.\n"
            "4. Toss the drained pasta into the sauce with a splash of pasta water.\n"
            "5. Finish with torn basil and grated Parmesan if you have it.\n\n"
            "Total time: about 20 minutes."
        ),
        "followups": [
            ("Can I make it without the chili flakes? My kids don't like spicy food.",
             "Of course. Just leave them out; a pinch of sugar can round off the acidity of the tomatoes instead."),
            ("How do I stop the garlic from burning?",
             "Start the garlic in oil that is warm but not smoking, keep the heat medium-low and add the tomatoes as soon as the edges turn pale gold. Burnt garlic turns bitter, so if it goes brown, start again."),
            ("Would it work with penne?",
             "Yes, penne or rigatoni hold the sauce nicely. Cooking time will be a couple of minutes longer, so check the packet."),
        ],
    },
    {
        "name": "ratatouille",
        "ask": "Comment faire une vraie ratatouille provençale ?",
        "answer": (
            "Voici une ratatouille traditionnelle pour 4 personnes :\n\n"
            "**Ingrédients** : 2 courgettes, 1 aubergine, 2 poivrons (rouge et jaune), 4 tomates bien mûres, "
            "2 oignons, 3 gousses d'ail, thym, laurier, huile d'olive, sel et poivre.\n\n"
            "1. Coupez tous les légumes en dés d'environ 2 cm.\n"
            "2. Faites revenir séparément l'aubergine, les courgettes et les poivrons dans l'huile d'olive : chaque légume garde ainsi son goût.\n"
            "3. Dans une cocotte, faites fondre les oignons et l'ail, puis ajoutez les tomates.\n"
            "4. Réunissez tous les légumes dans la cocotte avec le thym et le laurier, et laissez mijoter 45 minutes à feu doux.\n\n"
            "Elle est encore meilleure réchauffée le lendemain !"
        ),
        "followups": [
            ("Peut-on la congeler ?",
             "Oui, sans problème : elle se conserve environ 3 mois au congélateur dans une boîte hermétique. Décongelez-la au réfrigérateur la veille."),
            ("Qu'est-ce que je peux servir avec ?",
             "Du riz, de la semoule, des pâtes, ou simplement du pain de campagne. Elle accompagne aussi très bien un poisson grillé ou des œufs au plat."),
        ],
    },
    {
        "name": "Apfelstrudel",
        "ask": "Ich möchte am Wochenende einen Apfelstrudel backen. Kannst du mir ein einfaches Rezept geben?",
        "answer": (
            "Gerne! Ein einfacher Apfelstrudel mit fertigem Strudelteig:\n\n"
            "**Zutaten:** 1 Packung Strudelteig, 1 kg säuerliche Äpfel (z. B. Boskoop), 80 g Zucker, 1 TL Zimt, "
            "50 g Rosinen, 50 g gehackte Walnüsse, 60 g Semmelbrösel, 80 g Butter, Puderzucker.\n\n"
            "1. Äpfel schälen, entkernen und in dünne Scheiben schneiden; mit Zucker, Zimt, Rosinen und Nüssen mischen.\n"
            "2. Semmelbrösel in 30 g Butter goldbraun rösten.\n"
            "3. Teigblätter ausbreiten, mit flüssiger Butter bestreichen und die Brösel darauf verteilen.\n"
            "4. Die Apfelfüllung auf das untere Drittel geben, die Seiten einschlagen und aufrollen.\n"
            "5. Mit Butter bestreichen und bei 190 °C etwa 35–40 Minuten backen.\n\n"
            "Mit Puderzucker bestäuben und lauwarm mit Vanillesoße servieren. Guten Appetit!"
        ),
        "followups": [
            ("Kann ich die Rosinen weglassen?",
             "Klar, die Rosinen sind optional. Du kannst stattdessen etwas mehr Nüsse oder ein paar Preiselbeeren nehmen."),
            ("Wie lange hält sich der Strudel?",
             "Abgedeckt bei Zimmertemperatur 1–2 Tage, im Kühlschrank bis zu 4 Tage. Vor dem Servieren kurz im Ofen aufbacken, dann wird der Teig wieder knusprig."),
        ],
    },
    {
        "name": "miso soup",
        "ask": "How do I make a simple miso soup at home?",
        "answer": (
            "Miso soup (味噌汁, *misoshiru*) takes about 10 minutes:\n\n"
            "- 700 ml dashi (instant dashi granules are fine)\n"
            "- 3 tbsp miso paste (white miso is milder, red miso is saltier)\n"
            "- 150 g silken tofu, cubed\n"
            "- 1 tbsp dried wakame\n"
            "- 2 spring onions, sliced\n\n"
            "Heat the dashi until it's just below a simmer, add the tofu and wakame for 2 minutes, then turn off the heat. "
            "Dissolve the miso in a ladle of broth before stirring it in; never boil the soup after adding miso or it loses its aroma. "
            "Garnish with spring onions."
        ),
        "followups": [
            ("Is there a vegetarian alternative to dashi?",
             "Yes: kombu dashi. Soak a 10 cm piece of kombu in 700 ml cold water for 30 minutes (or overnight), then heat it slowly and remove the kombu just before it boils. Add a few dried shiitake for more depth."),
            ("What's the difference between white and red miso?",
             "White miso (shiro) is fermented for a shorter time with more rice, so it's sweet and mild. Red miso (aka) is fermented longer, often with more soybeans, and tastes saltier and more intense. Awase miso is a blend of the two."),
        ],
    },
    {
        "name": "sourdough troubleshooting",
        "ask": "My sourdough bread keeps coming out dense and flat. What am I doing wrong?",
        "answer": (
            "Dense, flat loaves usually come down to one of these:\n\n"
            "1. **Weak starter** – it should double within 4–8 hours after feeding. If it doesn't, feed it twice a day for a few days before baking.\n"
            "2. **Under-proofing** – bulk fermentation often needs 4–6 hours at 24 °C; the dough should grow by ~50% and feel airy.\n"
            "3. **Over-proofing** – if the dough collapses when you score it, shorten the final proof.\n"
            "4. **Not enough tension** – pre-shape and shape firmly so the loaf holds its height.\n"
            "5. **Oven too cool** – bake in a preheated Dutch oven at 250 °C with the lid on for the first 20 minutes.\n\n"
            "What's your kitchen temperature, and how long is your bulk ferment?"
        ),
        "followups": [
            ("My kitchen is around 19 °C and I do a 3-hour bulk.",
             "That's the likely culprit: at 19 °C fermentation is slow, so 3 hours is probably too short. Try 6–8 hours, or put the dough in the oven with only the light on to keep it around 24–26 °C. Judge by the dough (bubbly, domed, ~50% bigger) rather than the clock."),
            ("How do I know when the starter is ready?",
             "Use it at its peak: doubled in size, domed top, lots of bubbles, and a pleasant tangy smell. A spoonful dropped in water should float."),
        ],
    },
    {
        "name": "mapo tofu",
        "ask": "麻婆豆腐怎么做？想要正宗一点的。",
        "answer": (
            "正宗川味麻婆豆腐（2人份）：\n\n"
            "**材料**：嫩豆腐 400 克、牛肉末 100 克、郫县豆瓣酱 1.5 汤匙、豆豉 1 茶匙、花椒粉、辣椒面、蒜末、姜末、葱花、水淀粉。\n\n"
            "1. 豆腐切成 2 厘米小块，放入加盐的开水中焯 1 分钟，捞出备用。\n"
            "2. 热锅下油，把牛肉末炒到酥香。\n"
            "3. 加入豆瓣酱、豆豉、姜蒜末，小火炒出红油。\n"
            "4. 加一碗清水烧开，放入豆腐，轻轻推动，中火煮 5 分钟。\n"
            "5. 分两三次淋入水淀粉勾芡，出锅前撒上花椒粉和葱花。\n\n"
            "诀窍是“麻、辣、烫、香、酥、嫩、鲜”，花椒粉一定要最后放，香味才足。🌶️"
        ),
        "followups": [
            ("没有牛肉可以用猪肉吗？",
             "可以，猪肉末也很常见，味道稍微温和一些。也可以做成素的，用香菇丁代替肉末。"),
            ("豆腐总是碎怎么办？",
             "先用盐水焯一下豆腐会让它更结实；煮的时候不要用铲子翻炒，而是用锅铲背面轻轻推动，或者晃动炒锅。"),
        ],
    },
    {
        "name": "substitutions",
        "ask": "I'm out of eggs. What can I use instead in banana bread?",
        "answer": (
            "Banana bread is very forgiving. For each egg you can use:\n\n"
            "- 1 tbsp ground flaxseed + 3 tbsp water (let it sit 5 minutes until gel-like)\n"
            "- 60 g (¼ cup) unsweetened applesauce\n"
            "- 60 g plain yogurt\n"
            "- or simply an extra ½ mashed banana\n\n"
            "The loaf may be slightly denser, but it will still be moist and tasty."
        ),
        "followups": [
            ("Which one gives the best texture?",
             "Flax eggs keep the crumb closest to the original; applesauce makes it a little more cake-like and moist. I'd go with flax if you have it."),
            ("Can I also cut the sugar?",
             "Yes, you can usually cut the sugar by a third without problems, especially with very ripe bananas, which are already sweet."),
        ],
    },
    {
        "name": "knife skills",
        "ask": "What's the fastest way to dice an onion without crying?",
        "answer": (
            "Two things help most: technique and a sharp knife.\n\n"
            "1. Halve the onion through the root, peel it, and lay it flat side down.\n"
            "2. Make horizontal-ish vertical cuts toward the root, **without cutting through it** – the root holds everything together.\n"
            "3. Slice across those cuts to get even dice.\n\n"
            "To avoid tears: chill the onion for 15 minutes first, use a very sharp knife (it crushes fewer cells), and keep the root end for last, since it holds most of the irritating compounds. 🧅"
        ),
        "followups": [
            ("Does cutting under running water really work?",
             "It does reduce tears, but it's awkward and a bit risky with a sharp knife. Chilling the onion and good ventilation work almost as well."),
        ],
    },
]

COOKING_SYSTEMS = [
    "You are a friendly home-cooking assistant. Give practical recipes with quantities in metric units.",
    "You are a chef who helps beginners cook at home. Be encouraging and precise.",
    "Tu es un assistant culinaire. Réponds dans la langue de l'utilisateur.",
]


def gen_cooking(rng):
    r = rng.choice(RECIPES)
    msgs = maybe_system(rng, COOKING_SYSTEMS)
    msgs += [user(r["ask"]), asst(r["answer"])]
    fus = list(r["followups"])
    rng.shuffle(fus)
    for q, a in fus[: rng.randint(0, len(fus))]:
        msgs += [user(q), asst(a)]
    return msgs


# --------------------------------------------------------------------------------------
# coding help
# --------------------------------------------------------------------------------------

CODING = [
    {
        "ask": "How do I read a CSV file in Python and compute the average of one column?",
        "answer": (
            "With the standard library's `csv` module:\n\n"
            "```python\n"
            "import csv\n\n"
            "def column_mean(path, column):\n"
            "    total, count = 0.0, 0\n"
            "    with open(path, newline=\"\", encoding=\"utf-8\") as f:\n"
            "        for row in csv.DictReader(f):\n"
            "            total += float(row[column])\n"
            "            count += 1\n"
            "    return total / count if count else float(\"nan\")\n\n"
            "print(column_mean(\"sales.csv\", \"amount\"))\n"
            "```\n\n"
            "If you already use pandas, it's a one-liner: `pd.read_csv(\"sales.csv\")[\"amount\"].mean()`."
        ),
        "followups": [
            ("Some rows have an empty amount. How do I skip them?",
             "Check the value before converting:\n\n```python\nvalue = row[column].strip()\nif not value:\n    continue\ntotal += float(value)\n```\n\nWith pandas, `mean()` already ignores `NaN`, and empty cells are read as `NaN` by default."),
            ("The file uses semicolons as separators.",
             "Pass the delimiter explicitly: `csv.DictReader(f, delimiter=\";\")`, or `pd.read_csv(path, sep=\";\")`. European files often also use a comma as decimal separator; in pandas add `decimal=\",\"`."),
        ],
    },
    {
        "ask": "Why does this loop print the last index twice?\n\n```python\nitems = [\"a\", \"b\", \"c\"]\nfor i in range(len(items) + 1):\n    print(i, items[min(i, len(items) - 1)])\n```",
        "answer": (
            "`range(len(items) + 1)` yields 0, 1, 2, 3 – one more than the number of items. "
            "For `i = 3`, `min(i, len(items) - 1)` clamps the index back to 2, so `c` is printed again.\n\n"
            "The idiomatic fix is to iterate directly and use `enumerate` when you need the index:\n\n"
            "```python\n"
            "for i, item in enumerate(items):\n"
            "    print(i, item)\n"
            "```"
        ),
        "followups": [
            ("And if I need to start counting at 1?",
             "`enumerate` takes a start argument: `for i, item in enumerate(items, start=1):`."),
        ],
    },
    {
        "ask": "Write a JavaScript debounce function.",
        "answer": (
            "Here's a small, dependency-free debounce:\n\n"
            "```javascript\n"
            "function debounce(fn, wait = 300) {\n"
            "  let timer = null;\n"
            "  return function (...args) {\n"
            "    clearTimeout(timer);\n"
            "    timer = setTimeout(() => fn.apply(this, args), wait);\n"
            "  };\n"
            "}\n\n"
            "// usage\n"
            "const onResize = debounce(() => console.log(window.innerWidth), 200);\n"
            "window.addEventListener(\"resize\", onResize);\n"
            "```\n\n"
            "The function only runs once the calls have stopped for `wait` milliseconds."
        ),
        "followups": [
            ("How is that different from throttle?",
             "Debounce waits until the calls *stop*; throttle runs at most once every `wait` ms while calls keep coming. Use debounce for search-as-you-type, throttle for scroll handlers."),
            ("Can you add a cancel method?",
             "Sure:\n\n```javascript\nfunction debounce(fn, wait = 300) {\n  let timer = null;\n  const debounced = function (...args) {\n    clearTimeout(timer);\n    timer = setTimeout(() => fn.apply(this, args), wait);\n  };\n  debounced.cancel = () => clearTimeout(timer);\n  return debounced;\n}\n```"),
        ],
    },
    {
        "ask": "I committed to the wrong branch. How do I move my last commit to a new branch?",
        "answer": (
            "If you haven't pushed yet:\n\n"
            "```bash\n"
            "git branch feature/my-work      # new branch pointing at your commit\n"
            "git reset --hard HEAD~1         # move the current branch back one commit\n"
            "git switch feature/my-work\n"
            "```\n\n"
            "⚠️ `reset --hard` discards uncommitted changes, so stash them first if you have any."
        ),
        "followups": [
            ("I already pushed it to main...",
             "Then don't rewrite main's history. Create the branch as above, and on main use `git revert <commit>` to add a commit that undoes the change. That's safe for everyone who already pulled."),
            ("What's the difference between reset --soft and --hard?",
             "`--soft` moves the branch pointer but keeps your changes staged; `--mixed` (the default) keeps them in the working tree but unstaged; `--hard` throws them away."),
        ],
    },
    {
        "ask": "SQL: how do I get the top 3 customers by total order amount?",
        "answer": (
            "Group by customer, sum, sort and limit:\n\n"
            "```sql\n"
            "SELECT c.id, c.name, SUM(o.amount) AS total\n"
            "FROM customers AS c\n"
            "JOIN orders AS o ON o.customer_id = c.id\n"
            "GROUP BY c.id, c.name\n"
            "ORDER BY total DESC\n"
            "LIMIT 3;\n"
            "```\n\n"
            "On SQL Server use `SELECT TOP 3 ...` instead of `LIMIT`."
        ),
        "followups": [
            ("What if two customers tie for third place?",
             "Use a window function so ties are kept:\n\n```sql\nSELECT * FROM (\n  SELECT c.id, c.name, SUM(o.amount) AS total,\n         DENSE_RANK() OVER (ORDER BY SUM(o.amount) DESC) AS rnk\n  FROM customers c JOIN orders o ON o.customer_id = c.id\n  GROUP BY c.id, c.name\n) t\nWHERE rnk <= 3;\n```"),
            ("And only for orders from 2024?",
             "Add a filter before grouping: `WHERE o.created_at >= '2024-01-01' AND o.created_at < '2025-01-01'`."),
        ],
    },
    {
        "ask": "Wie finde ich mit der Bash alle .log-Dateien, die älter als 7 Tage sind, und lösche sie?",
        "answer": (
            "Mit `find`:\n\n"
            "```bash\n"
            "# erst anzeigen, was gelöscht würde\n"
            "find /var/log/myapp -name '*.log' -type f -mtime +7 -print\n\n"
            "# dann wirklich löschen\n"
            "find /var/log/myapp -name '*.log' -type f -mtime +7 -delete\n"
            "```\n\n"
            "`-mtime +7` bedeutet: zuletzt vor mehr als 7 Tagen geändert. Führe den Befehl immer zuerst mit `-print` aus, bevor du `-delete` verwendest."
        ),
        "followups": [
            ("Kann ich das täglich automatisch laufen lassen?",
             "Ja, per Cronjob. Mit `crontab -e` zum Beispiel diese Zeile eintragen, um jeden Tag um 3 Uhr aufzuräumen:\n\n```\n0 3 * * * find /var/log/myapp -name '*.log' -type f -mtime +7 -delete\n```"),
        ],
    },
    {
        "ask": "What's a clean way to validate an email address with a regex in Python?",
        "answer": (
            "A pragmatic pattern that catches typos without rejecting valid addresses:\n\n"
            "```python\n"
            "import re\n\n"
            "EMAIL_RE = re.compile(r\"^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$\")\n\n"
            "def looks_like_email(s: str) -> bool:\n"
            "    return EMAIL_RE.fullmatch(s) is not None\n\n"
            "assert looks_like_email(\"ada@example.org\")\n"
            "assert not looks_like_email(\"ada@example\")\n"
            "```\n\n"
            "Fully RFC 5322-compliant regexes are huge and still can't tell you whether the mailbox exists, so the real check is sending a confirmation email."
        ),
        "followups": [
            ("Does it accept addresses like josé@exemple.fr?",
             "Yes: `[^@\\s]` matches any non-whitespace character except `@`, including accented letters, so internationalised addresses like `josé@exemple.fr` or `用户@例子.中国` pass."),
        ],
    },
    {
        "ask": "My PyTorch training loop runs out of memory after a few hundred steps. Any idea why?",
        "answer": (
            "Memory that grows step after step is almost always a tensor that keeps the autograd graph alive. The classic culprit:\n\n"
            "```python\n"
            "running_loss += loss          # keeps every step's graph!\n"
            "```\n\n"
            "Use a Python float instead:\n\n"
            "```python\n"
            "running_loss += loss.item()\n"
            "```\n\n"
            "Other things to check: wrap evaluation in `torch.no_grad()`, call `optimizer.zero_grad(set_to_none=True)` every step, and don't append outputs to a list without `.detach()`."
        ),
        "followups": [
            ("That was it, the loss accumulation. Thanks!",
             "Great! It's one of the most common PyTorch gotchas. 🎉"),
            ("How can I see where memory goes?",
             "On GPU, `torch.cuda.memory_summary()` and `torch.cuda.max_memory_allocated()` give a quick overview; `torch.profiler` with `profile_memory=True` tells you which operators allocate what."),
        ],
    },
    {
        "ask": "Explain Python list comprehensions with an example.",
        "answer": (
            "A list comprehension builds a list from an iterable in one expression:\n\n"
            "```python\n"
            "squares = [x * x for x in range(10)]\n"
            "evens = [x for x in range(20) if x % 2 == 0]\n"
            "pairs = [(x, y) for x in \"ab\" for y in (1, 2)]\n"
            "```\n\n"
            "It's equivalent to a `for` loop that calls `append`, but shorter and usually faster. "
            "Use a regular loop when the logic needs several statements."
        ),
        "followups": [
            ("And dictionary comprehensions?",
             "Same idea with braces and a key: value pair:\n\n```python\nword_lengths = {w: len(w) for w in [\"chat\", \"données\", \"データ\"]}\n# {'chat': 4, 'données': 7, 'データ': 3}\n```"),
        ],
    },
]

CODING_SYSTEMS = [
    "You are an expert programming assistant. Use fenced code blocks with a language tag.",
    "You are a senior software engineer helping a colleague. Be precise and mention pitfalls.",
]


def gen_coding(rng):
    c = rng.choice(CODING)
    msgs = maybe_system(rng, CODING_SYSTEMS, p=0.7)
    msgs += [user(c["ask"]), asst(c["answer"])]
    fus = list(c["followups"])
    rng.shuffle(fus)
    for q, a in fus[: rng.randint(0, len(fus))]:
        msgs += [user(q), asst(a)]
    return msgs


# --------------------------------------------------------------------------------------
# travel
# --------------------------------------------------------------------------------------

DESTINATIONS = [
    ("Kyoto", "Japan", [
        "Fushimi Inari-taisha (伏見稲荷大社) early in the morning, before the crowds",
        "the Arashiyama bamboo grove and Tenryū-ji temple",
        "Kinkaku-ji (金閣寺), the Golden Pavilion",
        "a walk through Gion in the evening, and dinner on Pontochō alley",
        "Nishiki Market (錦市場) for street food",
    ], "Buy an ICOCA card for buses and trains; Kyoto's buses get very full, so walking or cycling is often faster."),
    ("Lisbon", "Portugal", [
        "tram 28 through Alfama (go early or late to avoid queues)",
        "the Belém Tower and pastéis de nata at Pastéis de Belém",
        "sunset at the Miradouro da Senhora do Monte",
        "the LX Factory on a Sunday",
        "a day trip to Sintra's Pena Palace",
    ], "Wear comfortable shoes: the calçada cobblestones are beautiful but slippery and steep."),
    ("Berlin", "Germany", [
        "the East Side Gallery and a walk along the Spree",
        "Museum Island (Museumsinsel), especially the Pergamon and Neues Museum",
        "the Reichstag dome (book the free visit online in advance)",
        "Sunday flea market and karaoke at Mauerpark",
        "a Currywurst and a Späti evening in Kreuzberg",
    ], "A day ticket (Tageskarte) for zones AB covers nearly everything; validate paper tickets before boarding."),
    ("Marrakech", "Morocco", [
        "Jemaa el-Fnaa square at dusk",
        "the Majorelle Garden and the Yves Saint Laurent museum",
        "the Bahia Palace",
        "a cooking class with a tagine lunch",
        "a day trip to the Atlas Mountains and the Ourika Valley",
    ], "Agree on taxi prices before getting in, and expect to bargain in the souks – it's part of the fun."),
    ("Québec City", "Canada", [
        "the Château Frontenac and the Dufferin Terrace",
        "the narrow streets of the Petit-Champlain quarter",
        "the Plains of Abraham",
        "Montmorency Falls, 15 minutes from the city",
        "a poutine and a maple taffy (tire d'érable) in winter",
    ], "Most people speak French first; a simple « Bonjour ! » goes a long way."),
    ("Chengdu", "China", [
        "the Giant Panda Breeding Research Base (成都大熊猫繁育研究基地) in the morning when pandas are active",
        "Kuanzhai Alley (宽窄巷子)",
        "a Sichuan hotpot dinner 🌶️",
        "tea and ear cleaning at People's Park",
        "a day trip to the Leshan Giant Buddha (乐山大佛)",
    ], "Install a translation app and a payment app before you go; cash is accepted but rarely used."),
]

TRAVEL_SYSTEMS = [
    "You are a travel planning assistant. Suggest realistic itineraries and practical tips.",
    "You are an experienced travel guide. Keep suggestions concise and mention local customs.",
]


def gen_travel(rng):
    city, country, sights, tip = rng.choice(DESTINATIONS)
    days = rng.choice([2, 3, 4, 5])
    msgs = maybe_system(rng, TRAVEL_SYSTEMS)
    ask = rng.choice([
        f"I'm going to {city} for {days} days next month. What should I see?",
        f"Planning a {days}-day trip to {city}, {country}. Can you suggest an itinerary?",
        f"First time in {city}! I have {days} days, any must-sees?",
    ])
    plan = list(sights)
    rng.shuffle(plan)
    lines = []
    for d in range(days):
        items = plan[d::days] or [rng.choice(sights)]
        lines.append(f"**Day {d + 1}:** " + "; ".join(items) + ".")
    msgs += [user(ask), asst(f"Here's a relaxed {days}-day plan for {city}:\n\n" + "\n".join(lines) + f"\n\nTip: {tip}")]
    extras = [
        (f"What's the best way to get from the airport to the center of {city}?",
         f"Public transport is usually the cheapest option; a taxi or ride-hailing is faster with luggage. Check the official airport website for current prices and night schedules before you land in {city}."),
        ("Any food I absolutely have to try?",
         {
             "Kyoto": "Try yudōfu (湯豆腐, simmered tofu), matcha sweets in Uji, and kaiseki if your budget allows. Nishiki Market is great for tasting a bit of everything.",
             "Lisbon": "Pastéis de nata, bifana sandwiches, grilled sardines (especially in June) and a glass of ginjinha, the cherry liqueur.",
             "Berlin": "Currywurst, Döner Kebab (Berlin claims to have invented it), Berliner Pfannkuchen, and a Club-Mate if you need caffeine.",
             "Marrakech": "Tagine, couscous on Friday, msemen pancakes for breakfast, and mint tea everywhere 🍵.",
             "Québec City": "Poutine, tourtière (meat pie), pea soup, and anything with maple syrup. In winter, try tire d'érable sur la neige.",
             "Chengdu": "火锅 (hotpot), 担担面 (dan dan noodles), 钟水饺 (Zhong dumplings) and 兔头 (spicy rabbit head) if you're adventurous.",
         }[city]),
        ("Is it safe to walk around at night?",
         f"Generally yes in the central, busy areas of {city}. Use common sense: keep an eye on your phone and wallet in crowds, and prefer well-lit streets."),
        ("What's the weather like then?",
         "It depends on the exact dates, but I'd pack layers and a light rain jacket. Would you like me to check the forecast closer to your trip?"),
    ]
    rng.shuffle(extras)
    for q, a in extras[: rng.randint(0, 3)]:
        msgs += [user(q), asst(a)]
    return msgs


# --------------------------------------------------------------------------------------
# math tutoring
# --------------------------------------------------------------------------------------

MATH_SYSTEMS = [
    "You are a patient math tutor. Explain step by step and check the student's understanding.",
    "You are a math teacher for high-school students. Use clear notation.",
]


def gen_quadratic(rng):
    r1, r2 = rng.sample([-5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6], 2)
    b, c = -(r1 + r2), r1 * r2

    def term(coef, var):
        if coef == 0:
            return ""
        sign = " + " if coef > 0 else " − "
        mag = abs(coef)
        return f"{sign}{'' if mag == 1 and var else mag}{var}"

    eq = f"x²{term(b, 'x')}{term(c, '')} = 0"
    lo, hi = sorted((r1, r2))

    def factor(r):
        return f"(x − {r})" if r > 0 else f"(x + {-r})"

    def paren(v):
        return f"({v})" if v < 0 else str(v)

    check = f"{paren(lo)}² + {paren(b)}·{paren(lo)} + {paren(c)} = {lo * lo} + {paren(b * lo)} + {paren(c)} = 0"
    return [
        user(f"Can you help me solve {eq}?"),
        asst(
            f"Sure! We look for two numbers whose product is {c} and whose sum is {-b}.\n\n"
            f"Those are {r1} and {r2}, so the equation factors as\n\n"
            f"{factor(r1)}{factor(r2)} = 0\n\n"
            f"A product is zero when one of its factors is zero, so **x = {lo}** or **x = {hi}**.\n\n"
            f"Check with x = {lo}: {check} ✓"
        ),
        user("What if it doesn't factor nicely?"),
        asst(
            "Then use the quadratic formula. For ax² + bx + c = 0:\n\n"
            "x = (−b ± √(b² − 4ac)) / 2a\n\n"
            "The discriminant Δ = b² − 4ac tells you how many real solutions there are: "
            "two if Δ > 0, one if Δ = 0, none (two complex ones) if Δ < 0."
        ),
    ]


def gen_derivative(rng):
    n = rng.randint(2, 5)
    k = rng.randint(2, 9)
    return [
        user(f"What's the derivative of f(x) = {k}x^{n} · sin(x)?"),
        asst(
            "Use the product rule: (uv)′ = u′v + uv′.\n\n"
            f"- u = {k}xⁿ with n = {n}, so u′ = {k * n}x^{n - 1}\n"
            "- v = sin(x), so v′ = cos(x)\n\n"
            f"f′(x) = {k * n}x^{n - 1} · sin(x) + {k}x^{n} · cos(x)"
        ),
    ]


def gen_integral(rng):
    a = rng.randint(1, 4)
    b = a + rng.randint(1, 3)
    val = (b**3 - a**3) / 3
    frac = f"{b**3 - a**3}/3"
    return [
        user(f"How do I compute ∫ from {a} to {b} of x² dx?"),
        asst(
            "Find an antiderivative, then apply the fundamental theorem of calculus.\n\n"
            "An antiderivative of x² is F(x) = x³/3, so\n\n"
            f"∫_{a}^{b} x² dx = F({b}) − F({a}) = {b**3}/3 − {a**3}/3 = {frac} ≈ {val:.3f}"
        ),
    ]


def gen_probability(rng):
    return rng.choice([
        [
            user("If I roll two dice, what's the probability that the sum is 7?"),
            asst(
                "There are 6 × 6 = 36 equally likely outcomes. The pairs summing to 7 are "
                "(1,6), (2,5), (3,4), (4,3), (5,2), (6,1): 6 outcomes.\n\n"
                "P(sum = 7) = 6/36 = 1/6 ≈ 16.7 %. 🎲 Seven is actually the most likely sum."
            ),
            user("And the probability of getting at least one six?"),
            asst(
                "Easiest via the complement: P(no six) = (5/6)² = 25/36, so\n\n"
                "P(at least one six) = 1 − 25/36 = 11/36 ≈ 30.6 %."
            ),
        ],
        [
            user("Explain the birthday paradox in simple terms."),
            asst(
                "In a group of just 23 people, the chance that two share a birthday is about 50 %.\n\n"
                "It feels surprising because we think of *our own* birthday, but what matters is every pair: "
                "23 people form 23·22/2 = 253 pairs. The probability that all birthdays are different is\n\n"
                "P = 365/365 · 364/365 · … · 343/365 ≈ 0.493,\n\n"
                "so the probability of at least one match is 1 − 0.493 ≈ 0.507."
            ),
        ],
    ])


def gen_french_math(rng):
    return [
        user("Je ne comprends pas pourquoi √2 est irrationnel. Tu peux m'expliquer ?"),
        asst(
            "Bien sûr ! On raisonne par l'absurde.\n\n"
            "Supposons que √2 = p/q avec p et q entiers, la fraction étant irréductible.\n"
            "Alors 2 = p²/q², donc p² = 2q² : p² est pair, donc p est pair. Écrivons p = 2k.\n"
            "Alors 4k² = 2q², soit q² = 2k² : q est pair lui aussi.\n\n"
            "Mais alors p et q sont tous deux divisibles par 2, ce qui contredit l'irréductibilité. "
            "Donc √2 ne peut pas s'écrire comme une fraction : il est irrationnel. ∎"
        ),
        user("Pourquoi p² pair implique p pair ?"),
        asst(
            "Par contraposée : si p est impair, p = 2m + 1, alors p² = 4m² + 4m + 1 = 2(2m² + 2m) + 1, "
            "qui est impair. Donc si p² est pair, p ne peut pas être impair."
        ),
    ]


def gen_math(rng):
    gen = rng.choice([gen_quadratic, gen_derivative, gen_integral, gen_probability, gen_french_math])
    msgs = maybe_system(rng, MATH_SYSTEMS) + gen(rng)
    if rng.random() < 0.4:
        msgs += [
            user("Can you give me a similar exercise to practise?"),
            asst(rng.choice([
                "Try this one: solve x² − 7x + 12 = 0. (Hint: which two numbers multiply to 12 and add up to 7?)",
                "Here's one: differentiate g(x) = x³ · cos(x). Remember the product rule, and that (cos x)′ = −sin x.",
                "Compute ∫₀¹ (3x² + 2x) dx. You should get a whole number!",
                "What's the probability of drawing two aces in a row from a 52-card deck without replacement?",
            ])),
        ]
        if rng.random() < 0.5:
            msgs += [user(rng.choice(["Is the answer 2?", "I got 4 and 3.", "I think it's 1/221?"])),
                     asst(rng.choice([
                         "Let's check together: plug your answer back into the original expression. If both sides match, you're right! ✅",
                         "Good work, that's correct! ✅",
                         "Close! Re-check the sign in the second step and try again.",
                     ]))]
    return msgs


# --------------------------------------------------------------------------------------
# customer support with tool calls
# --------------------------------------------------------------------------------------

SUPPORT_SYSTEMS = [
    "You are the customer support assistant of ShopNow. You can look up orders, track packages and answer questions about returns. Be polite and concise.",
    "You are a travel agency assistant. Use the available tools to check the weather and search for flights before answering.",
    "You are a helpful assistant with access to tools. Call a tool when you need live data; never invent order or flight details.",
]

CITIES = [("Paris", "CDG"), ("Berlin", "BER"), ("Tokyo", "HND"), ("New York", "JFK"), ("Madrid", "MAD"),
          ("Shanghai", "PVG"), ("Montréal", "YUL"), ("Zürich", "ZRH"), ("London", "LHR"), ("Rome", "FCO")]
CONDITIONS = [("sunny", "☀️"), ("partly cloudy", "⛅"), ("light rain", "🌦️"), ("overcast", "☁️"),
              ("thunderstorms", "⛈️"), ("snow", "❄️")]
PRODUCTS = ["wireless headphones", "running shoes (size 42)", "a stainless steel kettle", "a yoga mat",
            "a mechanical keyboard", "a set of ceramic mugs", "a phone case", "a backpack"]
CARRIERS = ["DHL", "UPS", "La Poste", "Yamato", "FedEx"]
MONTHS = ["2024-03", "2024-05", "2024-06", "2024-09", "2024-10", "2024-11"]


def gen_weather(rng):
    city, _ = rng.choice(CITIES)
    cond, emo = rng.choice(CONDITIONS)
    t = rng.randint(-3, 31) if cond != "snow" else rng.randint(-8, 1)
    unit = rng.choice(["celsius", "celsius", "fahrenheit"])
    shown = t if unit == "celsius" else round(t * 9 / 5 + 32)
    sym = "°C" if unit == "celsius" else "°F"
    q = rng.choice([
        f"What's the weather like in {city} right now?",
        f"Do I need an umbrella in {city} today?",
        f"Quel temps fait-il à {city} ?",
        f"Wie ist das Wetter gerade in {city}?",
    ])
    lang = "fr" if q.startswith("Quel") else "de" if q.startswith("Wie") else "en"
    wind = rng.randint(3, 40)
    payload = {"city": city, "temperature": shown, "unit": unit, "condition": cond,
               "humidity": rng.randint(30, 95), "wind_kph": wind}
    if lang == "fr":
        answer = f"À {city}, il fait actuellement {shown} {sym} avec un temps « {cond} » {emo}, vent à {wind} km/h."
    elif lang == "de":
        answer = f"In {city} sind es gerade {shown} {sym}, Wetterlage: {cond} {emo}, Wind mit {wind} km/h."
    else:
        umbrella = " Yes, take an umbrella! ☔" if "rain" in cond or "storm" in cond else ""
        answer = f"It's currently {shown}{sym} and {cond} {emo} in {city}, with wind at {wind} km/h.{umbrella}"
    pre = rng.choice(["", "", "Let me check the current weather."])
    return [user(q), call("get_weather", pre, city=city, unit=unit), tool(payload), asst(answer)]


def gen_flights(rng):
    (c1, a1), (c2, a2) = rng.sample(CITIES, 2)
    month = rng.choice(MONTHS)
    day = rng.randint(1, 28)
    date = f"{month}-{day:02d}"
    airlines = ["Air France", "Lufthansa", "ANA", "Iberia", "Swiss", "JAL", "Air Canada", "British Airways"]
    flights = []
    for _ in range(rng.randint(1, 3)):
        h = rng.randint(6, 21)
        dur = rng.randint(1, 13)
        flights.append({
            "flight": f"{rng.choice(['AF', 'LH', 'NH', 'IB', 'LX', 'JL', 'AC', 'BA'])}{rng.randint(100, 999)}",
            "airline": rng.choice(airlines),
            "departure": f"{date}T{h:02d}:{rng.choice(['05', '20', '35', '50'])}",
            "duration_hours": dur,
            "stops": rng.choice([0, 0, 1]),
            "price_eur": rng.randint(89, 1450),
        })
    flights.sort(key=lambda f: f["price_eur"])
    passengers = rng.choice([1, 1, 2, 3])
    q = f"Can you find me flights from {c1} to {c2} on {date}" + (f" for {passengers} people?" if passengers > 1 else "?")
    args = {"origin": a1, "destination": a2, "date": date}
    if passengers > 1:
        args["passengers"] = passengers
    lines = [
        f"- **{f['flight']}** ({f['airline']}), departs {f['departure'][11:]}, {f['duration_hours']} h, "
        f"{'non-stop' if f['stops'] == 0 else str(f['stops']) + ' stop'}, €{f['price_eur']}"
        for f in flights
    ]
    msgs = [
        user(q),
        call("search_flights", "", **args),
        tool({"results": flights, "currency": "EUR"}),
        asst(f"I found {len(flights)} option{'s' if len(flights) > 1 else ''} from {c1} ({a1}) to {c2} ({a2}) on {date}:\n\n"
             + "\n".join(lines) + f"\n\nThe cheapest is {flights[0]['flight']} at €{flights[0]['price_eur']}"
             + (" per person." if passengers > 1 else ".") + " Would you like more details on one of them?"),
    ]
    if rng.random() < 0.5:
        cond, emo = rng.choice(CONDITIONS)
        t = rng.randint(2, 30)
        msgs += [
            user(f"And what's the weather going to be like in {c2}?"),
            call("get_weather", "", city=c2, unit="celsius"),
            tool({"city": c2, "temperature": t, "unit": "celsius", "condition": cond}),
            asst(f"Right now it's {t} °C and {cond} {emo} in {c2}. For your travel date, I'd check the forecast again a few days before departure."),
        ]
    if rng.random() < 0.3:
        rate = round(rng.uniform(0.8, 1.6), 4)
        amount = flights[0]["price_eur"]
        cur = rng.choice(["USD", "CHF", "GBP", "CAD"])
        msgs += [
            user(f"How much is that in {cur}?"),
            call("convert_currency", "", amount=amount, **{"from": "EUR", "to": cur}),
            tool({"amount": amount, "from": "EUR", "to": cur, "rate": rate, "result": round(amount * rate, 2)}),
            asst(f"€{amount} is about {round(amount * rate, 2)} {cur} at today's rate ({rate})."),
        ]
    return msgs


def gen_order(rng):
    oid = f"SN-{rng.randint(100000, 999999)}"
    product = rng.choice(PRODUCTS)
    status = rng.choice(["shipped", "processing", "delivered", "delayed"])
    carrier = rng.choice(CARRIERS)
    tracking = f"{carrier[:2].upper()}{rng.randint(10**9, 10**10 - 1)}"
    ask = rng.choice([
        f"Hi, where is my order {oid}? I ordered {product} last week.",
        f"My order {oid} still hasn't arrived 😕",
        f"Bonjour, pouvez-vous me dire où en est ma commande {oid} ?",
        f"Hallo, ich warte noch auf meine Bestellung {oid}.",
    ])
    order = {"order_id": oid, "items": [product], "status": status, "carrier": carrier,
             "tracking_number": tracking if status != "processing" else None,
             "ordered_at": f"{rng.choice(MONTHS)}-{rng.randint(1, 28):02d}"}
    msgs = [user(ask), call("lookup_order", rng.choice(["", "Let me look that up for you."]), order_id=oid), tool(order)]
    if status == "processing":
        msgs.append(asst(f"Your order {oid} ({product}) is still being prepared in our warehouse and hasn't shipped yet. "
                         "You'll get an email with the tracking number as soon as it leaves."))
        return msgs
    if status == "delivered":
        msgs.append(asst(f"According to {carrier}, order {oid} ({product}) was delivered. "
                         "If you can't find it, please check with neighbours or your building's mailroom, and let me know – we can open an investigation."))
        if rng.random() < 0.6:
            msgs += [user("I really didn't get it. Can you help?"),
                     asst("I'm sorry about that. I've noted the issue on your order; our team will contact the carrier and get back to you within 2 business days. If the parcel is lost, we'll send a replacement or a full refund – your choice.")]
        return msgs
    eta = f"{rng.choice(MONTHS)}-{rng.randint(1, 28):02d}"
    events = [
        {"time": f"{eta}T08:12", "location": "Sorting centre", "event": "In transit"},
        {"time": f"{eta}T06:40", "location": "Departure hub", "event": "Departed facility"},
    ]
    msgs += [
        asst(f"Your order {oid} has shipped with {carrier} (tracking number {tracking}). Let me check where the parcel is."),
        user("Yes please."),
        call("track_package", "", carrier=carrier, tracking_number=tracking),
        tool({"tracking_number": tracking, "status": "in_transit" if status == "shipped" else "delayed",
              "estimated_delivery": eta, "events": events}),
    ]
    if status == "delayed":
        msgs.append(asst(f"The parcel is delayed at the carrier's sorting centre; the new estimated delivery date is {eta}. "
                         "I'm sorry for the wait! If it hasn't arrived by then, reply here and I'll escalate it."))
    else:
        msgs.append(asst(f"It's in transit and expected on {eta}. 📦 You can follow it with {carrier} using {tracking}."))
    if rng.random() < 0.4:
        msgs += [user("Can I still return it if it doesn't fit?"),
                 asst("Yes: you have 30 days after delivery to return any item in its original condition. Start the return from “My orders” and you'll get a prepaid label.")]
    return msgs


def gen_parallel_weather(rng):
    (c1, _), (c2, _) = rng.sample(CITIES, 2)
    (k1, e1), (k2, e2) = rng.sample(CONDITIONS, 2)
    t1, t2 = rng.randint(0, 30), rng.randint(0, 30)
    warmer = c1 if t1 > t2 else c2
    return [
        user(f"Compare the weather in {c1} and {c2} for me."),
        calls("", ("get_weather", {"city": c1, "unit": "celsius"}), ("get_weather", {"city": c2, "unit": "celsius"})),
        tool({"city": c1, "temperature": t1, "unit": "celsius", "condition": k1}),
        tool({"city": c2, "temperature": t2, "unit": "celsius", "condition": k2}),
        asst(f"- {c1}: {t1} °C, {k1} {e1}\n- {c2}: {t2} °C, {k2} {e2}\n\n"
             + (f"{warmer} is warmer right now." if t1 != t2 else "Both cities have the same temperature right now.")),
    ]


def gen_support(rng):
    gen = rng.choice([gen_weather, gen_flights, gen_order, gen_order, gen_parallel_weather])
    # the shop prompt for orders, the travel-agency prompt for weather and flights
    specific = SUPPORT_SYSTEMS[0:1] if gen is gen_order else SUPPORT_SYSTEMS[1:2]
    return maybe_system(rng, specific + SUPPORT_SYSTEMS[2:], p=0.75) + gen(rng)


# --------------------------------------------------------------------------------------
# translation
# --------------------------------------------------------------------------------------

PHRASES = [
    ("Where is the train station?", {
        "French": "Où est la gare ?", "German": "Wo ist der Bahnhof?", "Spanish": "¿Dónde está la estación de tren?",
        "Japanese": "駅はどこですか？", "Chinese": "火车站在哪里？"}),
    ("Could I have the bill, please?", {
        "French": "L'addition, s'il vous plaît.", "German": "Die Rechnung, bitte.", "Spanish": "La cuenta, por favor.",
        "Japanese": "お会計をお願いします。", "Chinese": "请给我账单。"}),
    ("I'm allergic to peanuts.", {
        "French": "Je suis allergique aux cacahuètes.", "German": "Ich bin allergisch gegen Erdnüsse.",
        "Spanish": "Soy alérgico a los cacahuetes.", "Japanese": "ピーナッツアレルギーがあります。", "Chinese": "我对花生过敏。"}),
    ("Thank you for your help, have a nice day!", {
        "French": "Merci pour votre aide, bonne journée !", "German": "Danke für Ihre Hilfe, einen schönen Tag noch!",
        "Spanish": "¡Gracias por su ayuda, que tenga un buen día!", "Japanese": "ご協力ありがとうございました。良い一日を！",
        "Chinese": "谢谢您的帮助，祝您有美好的一天！"}),
    ("The meeting has been moved to Thursday at 3 pm.", {
        "French": "La réunion a été déplacée à jeudi à 15 h.", "German": "Das Meeting wurde auf Donnerstag um 15 Uhr verschoben.",
        "Spanish": "La reunión se ha trasladado al jueves a las 15:00.", "Japanese": "会議は木曜日の午後3時に変更になりました。",
        "Chinese": "会议改到星期四下午三点。"}),
    ("Happy birthday! 🎂 I hope all your wishes come true.", {
        "French": "Joyeux anniversaire ! 🎂 J'espère que tous tes vœux se réaliseront.",
        "German": "Alles Gute zum Geburtstag! 🎂 Ich hoffe, all deine Wünsche gehen in Erfüllung.",
        "Spanish": "¡Feliz cumpleaños! 🎂 Espero que se cumplan todos tus deseos.",
        "Japanese": "お誕生日おめでとう！🎂 すべての願いが叶いますように。",
        "Chinese": "生日快乐！🎂 祝你心想事成。"}),
    ("Is breakfast included in the price?", {
        "French": "Le petit-déjeuner est-il compris dans le prix ?", "German": "Ist das Frühstück im Preis inbegriffen?",
        "Spanish": "¿El desayuno está incluido en el precio?", "Japanese": "朝食は料金に含まれていますか？",
        "Chinese": "价格包含早餐吗？"}),
]

NOTES = {
    "French": "Note the space before « ? » and « ! » in French typography.",
    "German": "German capitalises all nouns, e.g. *Bahnhof*, *Rechnung*.",
    "Spanish": "Spanish questions and exclamations open with an inverted mark: ¿…? and ¡…!",
    "Japanese": "This is the polite (です/ます) form, appropriate with strangers and staff.",
    "Chinese": "This is Simplified Chinese (简体中文), used in mainland China and Singapore.",
}

TRANSLATION_SYSTEMS = [
    "You are a professional translator. Translate faithfully and briefly explain nuances when useful.",
    "You are a language tutor. Provide translations with pronunciation hints when asked.",
]

ROMAJI = {
    "駅はどこですか？": "Eki wa doko desu ka?",
    "お会計をお願いします。": "O-kaikei o onegai shimasu.",
    "ピーナッツアレルギーがあります。": "Pīnattsu arerugī ga arimasu.",
}
PINYIN = {
    "火车站在哪里？": "Huǒchēzhàn zài nǎlǐ?",
    "请给我账单。": "Qǐng gěi wǒ zhàngdān.",
    "我对花生过敏。": "Wǒ duì huāshēng guòmǐn.",
    "价格包含早餐吗？": "Jiàgé bāohán zǎocān ma?",
}


def gen_translation(rng):
    src, targets = rng.choice(PHRASES)
    langs = list(targets)
    rng.shuffle(langs)
    msgs = maybe_system(rng, TRANSLATION_SYSTEMS)
    first = langs[0]
    msgs += [user(f"How do you say \"{src}\" in {first}?"),
             asst(f"In {first}: **{targets[first]}**\n\n{NOTES[first]}")]
    t = targets[first]
    if first == "Japanese" and t in ROMAJI and rng.random() < 0.7:
        msgs += [user("How do I pronounce that?"), asst(f"In romaji: *{ROMAJI[t]}*")]
    if first == "Chinese" and t in PINYIN and rng.random() < 0.7:
        msgs += [user("Can you add the pinyin?"), asst(f"Pinyin: *{PINYIN[t]}*")]
    for lang in langs[1: 1 + rng.randint(0, 3)]:
        msgs += [user(rng.choice([f"And in {lang}?", f"What about {lang}?", f"Now {lang}, please."])),
                 asst(f"{targets[lang]}")]
    if rng.random() < 0.25:
        back = rng.choice(langs)
        msgs += [user(f"Translate this back to English: {targets[back]}"),
                 asst(f"\"{src}\"")]
    return msgs


# --------------------------------------------------------------------------------------
# assembly
# --------------------------------------------------------------------------------------

TOPICS = [
    (gen_cooking, 0.17),
    (gen_coding, 0.20),
    (gen_travel, 0.14),
    (gen_math, 0.14),
    (gen_support, 0.22),
    (gen_translation, 0.13),
]

MAX_MESSAGES = 16


def _language(text):
    """Rough language of a user message, to close a conversation in the same language."""
    if any("\u3040" <= ch <= "\u30ff" for ch in text):
        return "ja"
    if any("\u4e00" <= ch <= "\u9fff" for ch in text):
        return "zh"
    first = text.split()[0] if text.split() else ""
    if first in {"Comment", "Quel", "Bonjour,", "Je", "Peut-on"}:
        return "fr"
    if first in {"Ich", "Wie", "Hallo,", "Kann"}:
        return "de"
    return "en"


THANKS_BY_LANG = {"fr": [3], "de": [4], "ja": [5], "zh": [6]}


def _close(rng, msgs):
    """Optionally add a closing thanks exchange (in the user's language) within MAX_MESSAGES."""
    if msgs[-1]["role"] == "assistant" and len(msgs) + 2 <= MAX_MESSAGES and rng.random() < 0.3:
        first_user = next(m["content"] for m in msgs if m["role"] == "user")
        choices = THANKS_BY_LANG.get(_language(first_user), [0, 1, 2, 7])
        q, a = THANKS[rng.choice(choices)]
        msgs += [user(q), asst(a)]
    return msgs


def _trim(msgs):
    """Cut to MAX_MESSAGES, ending on an assistant message that has no pending tool call."""
    msgs = msgs[:MAX_MESSAGES]
    while msgs and not (msgs[-1]["role"] == "assistant" and not msgs[-1].get("tool_calls")):
        msgs.pop()
    return msgs


def generate(n=N_CONVERSATIONS, seed=SEED):
    rng = random.Random(seed)
    gens, weights = zip(*TOPICS)
    out = []
    while len(out) < n:
        gen = rng.choices(gens, weights)[0]
        msgs = gen(rng)
        # occasionally chain a second topic (multi-topic sessions, longer conversations)
        if rng.random() < 0.15:
            extra = [m for m in rng.choices(gens, weights)[0](rng) if m["role"] != "system"]
            msgs = msgs + extra
        msgs = _trim(_close(rng, _trim(msgs)))
        if len(msgs) >= 2:
            out.append(msgs)
    return out


def dumps(convs) -> bytes:
    text = "".join(json.dumps({"messages": m}, ensure_ascii=False) + "\n" for m in convs)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as f:
        f.write(text.encode("utf-8"))
    return buf.getvalue()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--output", type=Path, default=OUT)
    p.add_argument("-n", type=int, default=N_CONVERSATIONS)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--check", action="store_true", help="only compare with the existing file")
    args = p.parse_args(argv)
    data = dumps(generate(args.n, args.seed))
    if args.check:
        same = args.output.exists() and args.output.read_bytes() == data
        print("up to date" if same else f"{args.output} differs from the generator output")
        return 0 if same else 1
    args.output.write_bytes(data)
    print(f"wrote {args.n} conversations, {len(data)} bytes to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
