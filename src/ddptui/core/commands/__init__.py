"""The `:` commands both front ends share, `:until-collective`, and `--batch`."""
