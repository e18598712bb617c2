def generate_level(seed, config):
    return {"n": 0, "seed": seed}
