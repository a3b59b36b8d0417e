def judge(request):
    return {"score": 0.5}
