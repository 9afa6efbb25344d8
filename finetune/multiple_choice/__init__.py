"""Multiple-choice tasks: RACE, SWAG- and COPA-style choices."""
