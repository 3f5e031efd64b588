print("attestgate")
