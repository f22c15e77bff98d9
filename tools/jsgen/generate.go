package main

//go:generate go run . -js ../../js
