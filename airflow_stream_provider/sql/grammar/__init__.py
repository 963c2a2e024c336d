"""What every stream language reads with: the lexer (tokens with positions) and a token cursor."""
