"""The runtime's own pieces that need no environment code: DSL event rewards, observation policies."""
from __future__ import annotations

from envforge.pipeline.runtime import EgocentricCrop, LineOfSight, RadiusObservation, RandomMask, event_rewards


def test_event_rewards_read_trigger_keyed_maps_single_value_maps_and_inline_values():
    config = {"reward": {
        "events": [{"trigger": "game_won", "value_key": "win_rewards"},      # paper B.4: one-value map
                   {"trigger": "shell_collected", "value_key": "shells"},     # keyed by trigger
                   {"trigger": "bonus", "value": 2},                          # inline
                   {"trigger": "orphan", "value_key": "missing"}],
        "win_rewards": {"agent_victory": 1.0},
        "shells": {"shell_collected": 1.0, "other": 5.0},
    }}
    assert event_rewards(config) == {"game_won": 1.0, "shell_collected": 1.0, "bonus": 2.0}
    assert event_rewards({}) == {} and event_rewards(None) == {}


GRID = ["#####",
        "#..##",
        "#.#.#",
        "#...#",
        "#####"]
STATE = {"grid": GRID, "agent": {"pos": [1, 1]}}


def test_egocentric_crop_centres_on_the_agent_and_pads_outside():
    view = EgocentricCrop(radius=1)(STATE, 0)["view"]
    assert view == ["###", "#..", "#.#"]
    assert EgocentricCrop(radius=2, outside="~")({"grid": GRID, "agent": {"pos": [0, 0]}}, 0)["view"][0] == "~~~~~"


def test_radius_hides_far_cells_and_line_of_sight_hides_cells_behind_walls():
    assert RadiusObservation(radius=1)(STATE, 0)["view"][3] == "?????"
    seen = LineOfSight(radius=4)({"grid": GRID, "agent": {"pos": [1, 3]}}, 0)["view"]
    assert seen[1][3] == "?"  # behind the wall at (2, 2)
    assert seen[3][3] == "."  # along the open corridor


def test_random_mask_is_the_same_for_the_same_step_and_keeps_the_agent_visible():
    mask = RandomMask(p=0.5, seed=3)
    assert mask(STATE, 4) == mask(STATE, 4)
    assert mask(STATE, 4)["view"][1][1] == "."


def test_the_default_skin_fills_every_views_display_name_not_only_a_non_empty_list():
    from envforge.pipeline.runtime import SkinEnv

    class Skinned(SkinEnv):  # the template names {v_display} for views of every shape (dsl_schema/names.py)
        def _dsl_config(self):
            self.configs = {
                "skin": {"template": "score {score_display} | inventory:\n{inventory_display}|\n{board_display}"}
            }

        def transition(self, state, action):
            return state

        def reward(self, state, action, next_state):
            return 0.0, [], {}

    env = Skinned()
    shown = env.render_skin({"score": 3, "inventory": [], "board": ["#.", [1, 2]]})
    assert shown == "score 3 | inventory:\n|\n#.\n1 2"  # not the YAML dump a KeyError used to fall back to
