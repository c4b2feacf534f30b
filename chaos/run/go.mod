module github.com/seed-a6839e30/dlm/chaos/run

go 1.26.0

require (
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2 // indirect
	go.uber.org/goleak v1.3.0
)

replace github.com/seed-a6839e30/dlm => ../..
