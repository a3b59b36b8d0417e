def local(request):
    return "x"


def hot(request):
    return "x"
