"""What the agents are asked: dataset profiles and task streams (``tasks``), the datasets and their
graders (``datasets``) and the prompt templates (``prompts``)."""
