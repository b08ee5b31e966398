module github.com/casbreaker/casbreaker/bench/peers

go 1.26

require (
	github.com/afex/hystrix-go v0.0.0-20180502004556-fa1af6a1f4f5
	github.com/casbreaker/casbreaker v0.0.0
	github.com/eapache/go-resiliency v1.7.0
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/sony/gobreaker/v2 v2.4.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/smartystreets/goconvey v1.8.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
)

replace github.com/casbreaker/casbreaker => ../..
