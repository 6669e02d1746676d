"""Words of scripts that ``\\w`` alone reads wrong: Indic vowel signs (combining marks) are part of
their words, and each character of a script written without spaces (Chinese, Japanese, Thai) is a
word, so near duplicates and benchmark copies in those scripts are found and different words are
not folded into one."""
from chatdata import History
from chatdata.hygiene import decontaminate, find_duplicates
from chatdata.hygiene.words import words_of

ZH = ("今天天气很好，我们一起去公园散步吧。公园里有很多花，红的黄的白的都有，非常漂亮。"
      "小朋友们在草地上玩耍，老人们在树下下棋，大家都很开心。")
HI = "भारत एक विशाल देश है जहाँ अनेक भाषाएँ बोली जाती हैं और लोग मिलजुल कर रहते हैं यह बहुत सुंदर है"


def near(a, b, threshold=0.8):
    h = History.from_chats([[{"role": "user", "content": a}], [{"role": "user", "content": b}]])
    return find_duplicates(h, "near", threshold)[0].tolist()


def test_vowel_signs_are_part_of_their_words():
    """Before: "हिन्दी" was three words (ह, न, द) and "है" / "हो", "काम" / "कम" each one word."""
    assert words_of("हिन्दी काम कम") == ["हिन्दी", "काम", "कम"]
    assert words_of("है") != words_of("हो")
    other = HI.replace("है", "हो")  # every "is" changed: 3 of 20 words
    assert near(HI, other) == [-1, -1]
    assert near(HI, HI + " और") == [-1, 0]  # one word added at the end: a near copy (Jaccard 17/18)


def test_each_character_of_a_script_without_spaces_is_a_word():
    """Before: a clause of Chinese was one word, so a one-character change hid a near copy."""
    assert words_of("東京は日本の首都です。") == list("東京は日本の首都です")
    assert words_of("ภาษาไทย") == list("ภาษาไทย")
    assert words_of("฿100・ゝ") == ["100", "ゝ"]  # the scripts' punctuation and signs still separate
    assert near(ZH, ZH.replace("红的", "蓝的")) == [-1, 0]
    assert near(ZH, "我们明天一起去图书馆看书吧，那里很安静，书也很多，可以学习一整天。") == [-1, -1]


def test_a_chinese_benchmark_item_is_found_inside_a_reply():
    bench = ["小明有五个苹果，他给了小红两个，又买了三个，请问小明现在有几个苹果？"]
    h = History.from_chats([
        [{"role": "user", "content": "请回答：小明有五个苹果，他给了小红两个，又买了三个。"},
         {"role": "assistant", "content": "六个。"}],
        [{"role": "user", "content": "小明有五个苹果。"}],  # 7 characters: below the 13-gram
    ])
    assert decontaminate(h, bench).tolist() == [0]


def test_an_emoji_variation_selector_is_no_word():
    assert words_of("I ❤️ you") == words_of("I ❤ you") == ["i", "you"]
