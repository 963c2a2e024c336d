"""IoTDB's databases, series and points on the warehouse's Delta tables: the store (:mod:`.store`),
the query runner (:mod:`.query`, with :mod:`.expressions` and :mod:`.shaping`) and the statement
handlers (:mod:`.statements`)."""
