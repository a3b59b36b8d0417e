def writer(request):
    return "ok"
