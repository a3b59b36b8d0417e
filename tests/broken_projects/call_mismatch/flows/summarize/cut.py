def cut(text, max_words):
    return " ".join(text.split()[:max_words])
