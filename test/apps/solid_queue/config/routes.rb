# frozen_string_literal: true

Rails.application.routes.draw do
  get "/enqueue", to: "jobs#create"
end
