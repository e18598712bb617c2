def validate_level(state):
    return True, []


def max_reward(state):
    return 1.0
